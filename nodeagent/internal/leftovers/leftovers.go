package leftovers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/drain"
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
	// MaxDrain bounds how long a mode whose kernel still carries
	// connections of its own (dataplane.Drainer: IPVS) is kept for them
	// before it is removed anyway; 0 means drain.DefaultMax.
	MaxDrain time.Duration
	// Now reads the clock; time.Now when nil.
	Now func() time.Time
	// AtOnce removes a mode with connections of its own without waiting
	// for them (they break): switchyard-agent --cleanup, an explicit
	// uninstall that runs once and must leave nothing, uses it.
	AtOnce bool
}

// Cleaner removes the objects of modes not in use. It is safe for
// concurrent use.
type Cleaner struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// drains are the modes found with connections to drain; a mode is
	// removed once they are gone or MaxDrain passed.
	drains map[switchyardv1.DataplaneMode]*drain.Bound
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
	return &Cleaner{cfg: cfg, log: log, drains: map[switchyardv1.DataplaneMode]*drain.Bound{}}, nil
}

// Outcome is what Clean did with one mode.
type Outcome struct {
	Mode switchyardv1.DataplaneMode
	// Skipped says why the mode was not cleaned; empty when it was.
	Skipped string
	// Draining is how many connections of the mode's own the kernel
	// still carries: the mode is kept for them (not cleaned, no error).
	Draining int
	// Cut is how many such connections Config.AtOnce removed the mode
	// with (they broke).
	Cut int
	// Err is the mode's failure; nil when clean or skipped.
	Err error
}

// Clean removes the objects of every mode in Modes but keep; keep
// UNSPECIFIED cleans them all (uninstall). With keep DRY_RUN it touches
// nothing. A mode whose kernel still carries connections of its own
// (IPVS) is kept until they drain or MaxDrain passes: the error then
// wraps dataplane.ErrDraining, so the caller retries soon. The error
// joins every mode's failure.
func (c *Cleaner) Clean(ctx context.Context, keep switchyardv1.DataplaneMode) ([]Outcome, error) {
	if keep == switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN {
		c.log.Info("dry-run mode: other modes' rules left untouched")
		return nil, nil
	}
	return c.cleanModes(ctx, func(m switchyardv1.DataplaneMode) bool { return m != keep })
}

// Retry checks again only the modes the last Clean kept for their
// connections, and removes those drained (or past MaxDrain): what a
// caller retries every few seconds while they drain, without building,
// reading and removing the other modes again each time. Its error is
// Clean's.
func (c *Cleaner) Retry(ctx context.Context) ([]Outcome, error) {
	return c.cleanModes(ctx, func(m switchyardv1.DataplaneMode) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, draining := c.drains[m]
		return draining
	})
}

// cleanModes cleans the modes of Modes that pick selects.
func (c *Cleaner) cleanModes(ctx context.Context, pick func(switchyardv1.DataplaneMode) bool) ([]Outcome, error) {
	var out []Outcome
	var errs []error
	for _, m := range Modes {
		if !pick(m) {
			continue
		}
		o := c.clean(ctx, m)
		out = append(out, o)
		if o.Err != nil {
			errs = append(errs, o.Err)
		}
		if o.Draining > 0 {
			errs = append(errs, fmt.Errorf("%s mode kept for %d connections: %w", m, o.Draining, dataplane.ErrDraining))
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
	if dr, ok := dp.(dataplane.Drainer); ok {
		n, err := dr.Connections(ctx)
		if err != nil {
			o.Err = fmt.Errorf("connections of %s mode: %w", dp.Mode(), err)
			return o
		}
		if c.cfg.AtOnce {
			o.Cut = n
			if n > 0 {
				c.log.Warn("removing the mode at once breaks its connections", "mode", m.String(), "connections", n)
			}
		} else if o.Draining = c.draining(m, n); o.Draining > 0 {
			return o
		}
	}
	if err := dp.Cleanup(ctx); err != nil {
		o.Err = fmt.Errorf("clean up %s mode: %w", dp.Mode(), err)
		return o
	}
	c.log.Debug("mode cleaned up", "mode", dp.Mode())
	return o
}

// draining decides whether mode m, whose kernel carries n connections of
// its own, is kept for them: it returns n while they last and MaxDrain
// has not passed since they were first seen, else 0 (remove it now).
func (c *Cleaner) draining(m switchyardv1.DataplaneMode, n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.drains[m]
	if n == 0 {
		if b != nil {
			b.End()
			delete(c.drains, m)
		}
		return 0
	}
	if b == nil {
		b = &drain.Bound{What: "the " + dataplane.ModeName(m) + " mode", Max: c.cfg.MaxDrain, Now: c.cfg.Now, Log: c.log}
		c.drains[m] = b
	}
	if b.Keep(n) {
		return n
	}
	delete(c.drains, m)
	return 0
}
