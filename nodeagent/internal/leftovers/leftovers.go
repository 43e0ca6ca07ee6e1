package leftovers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Modes are the modes whose objects outlive the agent process, in the
// order Clean removes them.
var Modes = []switchyardv1.DataplaneMode{
	switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES,
	switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES,
	switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
}

// Config configures a Cleaner.
type Config struct {
	// Build returns the dataplane of a mode, bound to the node's
	// namespace; required. An error wrapping dataplane.ErrUnavailable
	// means the kernel cannot run the mode, so nothing of it exists.
	Build func(mode switchyardv1.DataplaneMode) (dataplane.Dataplane, error)
	// Logger gets one line per mode; nil discards.
	Logger *slog.Logger
}

// Cleaner removes the objects of modes not in use.
type Cleaner struct {
	cfg Config
	log *slog.Logger
}

// New returns a Cleaner.
func New(cfg Config) (*Cleaner, error) {
	if cfg.Build == nil {
		return nil, errors.New("leftovers: no dataplane constructor")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cleaner{cfg: cfg, log: log}, nil
}

// Outcome is what Clean did with one mode.
type Outcome struct {
	Mode switchyardv1.DataplaneMode
	// Skipped says why the mode was not cleaned; empty when it was.
	Skipped string
	// Err is the mode's failure; nil when clean or skipped.
	Err error
}

// Clean removes the objects of every mode in Modes but keep; keep
// UNSPECIFIED cleans them all (uninstall). With keep DRY_RUN it touches
// nothing. The error joins every mode's failure.
func (c *Cleaner) Clean(ctx context.Context, keep switchyardv1.DataplaneMode) ([]Outcome, error) {
	if keep == switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN {
		c.log.Info("dry-run mode: other modes' rules left untouched")
		return nil, nil
	}
	var out []Outcome
	var errs []error
	for _, m := range Modes {
		if m == keep {
			continue
		}
		o := c.clean(ctx, m)
		out = append(out, o)
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
	}
	return out, errors.Join(errs...)
}

func (c *Cleaner) clean(ctx context.Context, m switchyardv1.DataplaneMode) Outcome {
	o := Outcome{Mode: m}
	dp, err := c.cfg.Build(m)
	switch {
	case errors.Is(err, dataplane.ErrUnavailable):
		o.Skipped = err.Error()
		c.log.Info("mode unavailable on this kernel: nothing of it to remove", "mode", m.String(), "reason", err)
		return o
	case err != nil:
		o.Err = fmt.Errorf("clean up %s: %w", m, err)
		return o
	}
	if err := dp.Cleanup(ctx); err != nil {
		o.Err = fmt.Errorf("clean up %s mode: %w", dp.Mode(), err)
		return o
	}
	c.log.Debug("mode cleaned up", "mode", dp.Mode())
	return o
}
