package ipvs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// DummyInterface is the link service addresses are bound to, so that the
// kernel treats them as local and IPVS sees their packets at LOCAL_IN.
const DummyInterface = "kube-ipvs0"

// Defaults.
const (
	DefaultScheduler     = "rr"
	DefaultGracePeriod   = 15 * time.Minute
	DefaultDrainInterval = 5 * time.Second
)

// ErrIPVSUnavailable says the kernel has no IPVS (CONFIG_IP_VS unset or
// the module not loadable). github.com/moby/ipvs does not fail in that
// case, it silently programs nothing, so the mode checks for the
// generic-netlink family "IPVS" itself.
// It is also a dataplane.ErrUnavailable.
var ErrIPVSUnavailable error = unavailableError("the kernel has no IPVS (generic netlink family \"IPVS\" not found): the ipvs mode cannot run here")

// IsIPVSUnavailable reports whether err says the kernel has no IPVS.
func IsIPVSUnavailable(err error) bool { return errors.Is(err, ErrIPVSUnavailable) }

type unavailableError string

func (e unavailableError) Error() string { return string(e) }

// Is makes errors.Is(err, dataplane.ErrUnavailable) hold.
func (e unavailableError) Is(target error) bool { return target == dataplane.ErrUnavailable }

// Config configures a Dataplane. Kernel and Runner are required; both
// must be bound to the same network namespace (NetlinkKernel.Config fills
// them for one namespace).
type Config struct {
	// Kernel programs IPVS, the dummy link and sysctls.
	Kernel Kernel
	// Runner runs ipset and iptables binaries in the node's namespace.
	Runner command.Runner
	// Families to program; default IPv4 and IPv6.
	Families []dataplane.Family
	// Flavour of iptables; xtables.FlavourAuto detects it on the first
	// Apply.
	Flavour xtables.Flavour
	// Scheduler is used when NodeConfig.ipvs_scheduler is empty; "" means
	// DefaultScheduler.
	Scheduler string
	// GracePeriod bounds how long a removed TCP or SCTP real server drains
	// at weight 0 before it is deleted even with connections left; 0 means
	// DefaultGracePeriod.
	GracePeriod time.Duration
	// DrainInterval is how often Run checks draining real servers; 0 means
	// DefaultDrainInterval.
	DrainInterval time.Duration
	// SkipSysctls leaves the namespace's sysctls alone (tests of callers
	// that set them themselves).
	SkipSysctls bool
	// Conntrack deletes stale UDP conntrack entries; nil disables that.
	Conntrack conntrack.Cleaner
	// Clock drives graceful termination; nil means the real clock.
	Clock clock.Clock
	// Logger receives skips and sync summaries; nil discards.
	Logger *slog.Logger
}

// Dataplane programs one node's namespace with IPVS. It implements
// dataplane.Dataplane.
type Dataplane struct {
	cfg   Config
	log   *slog.Logger
	clock clock.Clock

	mu      sync.Mutex
	ready   bool // IPVS checked, flavour known, sysctls set
	flavour xtables.Flavour
	// applied is what the kernel holds of this mode after the last
	// successful Apply; nil makes the next Apply read the kernel back.
	applied  *model
	draining map[rsKey]time.Time // deadline of each draining real server
	udp      map[dataplane.Family]map[string]conntrack.UDPPort
	stats    dataplane.SyncStats
}

var _ dataplane.Dataplane = (*Dataplane)(nil)

// New returns a Dataplane; it touches nothing until Apply, Drain, Run or
// Cleanup.
func New(cfg Config) (*Dataplane, error) {
	if cfg.Kernel == nil {
		return nil, errors.New("ipvs: Config.Kernel is required")
	}
	if cfg.Runner == nil {
		return nil, errors.New("ipvs: Config.Runner is required")
	}
	fams, err := dataplane.Families(cfg.Families)
	if err != nil {
		return nil, fmt.Errorf("ipvs: %w", err)
	}
	cfg.Families = fams
	if cfg.Scheduler == "" {
		cfg.Scheduler = DefaultScheduler
	}
	if !ValidScheduler(cfg.Scheduler) {
		return nil, fmt.Errorf("ipvs: unknown scheduler %q", cfg.Scheduler)
	}
	if cfg.GracePeriod <= 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.DrainInterval <= 0 {
		cfg.DrainInterval = DefaultDrainInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Dataplane{cfg: cfg, log: log, clock: clk, flavour: cfg.Flavour,
		draining: map[rsKey]time.Time{}, udp: map[dataplane.Family]map[string]conntrack.UDPPort{}}, nil
}

// Mode implements dataplane.Dataplane.
func (d *Dataplane) Mode() string { return "ipvs" }

// LastSync returns the statistics of the last Apply or Cleanup.
func (d *Dataplane) LastSync() dataplane.SyncStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Apply implements dataplane.Dataplane. It renders st, compares it with
// what the kernel holds (read back on the first Apply, with opts.Full and
// after a failure; otherwise what the last Apply left) and changes only
// the difference.
func (d *Dataplane) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	if st == nil {
		return errors.New("ipvs: nil state")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = dataplane.SyncStats{}
	if err := d.prepare(ctx); err != nil {
		return fmt.Errorf("ipvs apply: %w", err)
	}
	want := render(st, renderOptions{families: d.cfg.Families, scheduler: d.cfg.Scheduler})
	for _, s := range want.skips {
		d.log.Warn("skipped input", "service", s.Service, "reason", s.Reason)
	}
	have := d.applied
	if have == nil || opts.Full {
		var err error
		if have, err = d.readKernel(ctx, want); err != nil {
			d.applied = nil
			return fmt.Errorf("ipvs apply: read kernel: %w", err)
		}
	}
	// Whatever happens below, the kernel may now differ from both; a
	// failure makes the next Apply read it back.
	d.applied = nil
	if err := d.sync(ctx, have, want); err != nil {
		return fmt.Errorf("ipvs apply: %w", err)
	}
	d.applied = have
	if err := d.drainLocked(ctx); err != nil {
		d.applied = nil
		return fmt.Errorf("ipvs apply: %w", err)
	}
	d.stats.Draining = len(d.draining)
	return d.cleanConntrack(ctx, want)
}

// prepare runs the one-time checks and settings of the first Apply.
func (d *Dataplane) prepare(ctx context.Context) error {
	if d.ready {
		return nil
	}
	if err := d.cfg.Kernel.CheckIPVS(ctx); err != nil {
		return err
	}
	if d.flavour == xtables.FlavourAuto {
		fl, err := xtables.DetectFlavour(ctx, d.cfg.Runner)
		if err != nil {
			return err
		}
		d.flavour = fl
		d.log.Info("iptables flavour detected", "flavour", string(fl))
	}
	if !d.cfg.SkipSysctls {
		if err := d.setSysctls(ctx); err != nil {
			return err
		}
	}
	d.ready = true
	return nil
}

// sysctls kube-proxy's IPVS mode needs: conntrack for IPVS connections
// (our MASQUERADE rules see them), and the expiry of connections to
// deleted or weight-0 real servers so graceful termination ends.
var sysctls = [][2]string{
	{"net.ipv4.vs.conntrack", "1"},
	{"net.ipv4.vs.expire_nodest_conn", "1"},
	{"net.ipv4.vs.expire_quiescent_template", "1"},
	{"net.ipv4.ip_forward", "1"},
}

func (d *Dataplane) setSysctls(ctx context.Context) error {
	for _, kv := range sysctls {
		cur, err := d.cfg.Kernel.Sysctl(ctx, kv[0])
		if err == nil && cur == kv[1] {
			continue
		}
		if err := d.cfg.Kernel.SetSysctl(ctx, kv[0], kv[1]); err != nil {
			if errors.Is(err, syscall.EROFS) {
				// An unprivileged container's /proc/sys (deploy/'s agent).
				return fmt.Errorf("sysctl %s=%s: %w: set the ipvs mode's sysctls on the node before the agent starts (deploy/components/ipvs does)", kv[0], kv[1], err)
			}
			return fmt.Errorf("sysctl %s=%s: %w", kv[0], kv[1], err)
		}
	}
	return nil
}

// cleanConntrack deletes the UDP conntrack entries the change left stale.
// The kernel is already right; a failure only leaves stale flows, so it
// is reported as a dataplane.ConntrackError without forcing a read-back.
func (d *Dataplane) cleanConntrack(ctx context.Context, want *desired) error {
	var errs []error
	for _, fam := range d.cfg.Families {
		stale := conntrack.Stale(d.udp[fam], want.udp[fam])
		d.udp[fam] = want.udp[fam]
		if d.cfg.Conntrack == nil || len(stale) == 0 {
			continue
		}
		if err := d.cfg.Conntrack.DeleteUDP(ctx, fam, stale); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fam, err))
		}
	}
	if len(errs) > 0 {
		return &dataplane.ConntrackError{Err: errors.Join(errs...)}
	}
	return nil
}

// Drain deletes the draining real servers whose connections have ended or
// whose grace period is over, and returns how many are still draining.
func (d *Dataplane) Drain(ctx context.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.drainLocked(ctx); err != nil {
		d.applied = nil
		return len(d.draining), fmt.Errorf("ipvs drain: %w", err)
	}
	return len(d.draining), nil
}

// Run calls Drain every DrainInterval until ctx ends. Errors are logged:
// the next round or Apply retries.
func (d *Dataplane) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.clock.After(d.cfg.DrainInterval):
		}
		if _, err := d.Drain(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("draining real servers", "error", err)
		}
	}
}

// Cleanup implements dataplane.Dataplane: it deletes every virtual server
// on an address of kube-ipvs0 or on a node port this mode registered, the
// link kube-ipvs0, the jumps to and the chains of this mode, and its
// ipsets. Foreign virtual servers, chains and sets stay.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = dataplane.SyncStats{}
	d.applied = nil
	clear(d.draining)
	clear(d.udp)
	if d.flavour == xtables.FlavourAuto {
		fl, err := xtables.DetectFlavour(ctx, d.cfg.Runner)
		if err != nil {
			return fmt.Errorf("ipvs cleanup: %w", err)
		}
		d.flavour = fl
	}
	if err := d.cleanup(ctx); err != nil {
		return fmt.Errorf("ipvs cleanup: %w", err)
	}
	return nil
}
