package iptables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtinfo"
)

// Config configures a Dataplane.
type Config struct {
	// Runner runs iptables binaries in the node's network namespace.
	Runner command.Runner
	// Families to program; default IPv4 and IPv6.
	Families []dataplane.Family
	// Flavour of iptables; xtables.FlavourAuto detects it on the first
	// Apply.
	Flavour xtables.Flavour
	// ShardBits picks 1<<ShardBits shard chains; 0 means DefaultShardBits.
	ShardBits int
	// MaxChainsPerRestore bounds the chains one restore declares (nft's
	// restore slows down with it). 0: 5000 on nft, unbounded on legacy.
	MaxChainsPerRestore int
	// RewriteTablesAbove is the number of chains a full sync (the first,
	// or one with ApplyOptions.Full) must write before it replaces the nat
	// and filter tables whole with one restore without --noflush, foreign
	// chains and rules carried over verbatim from the read-back (see
	// doc.go). 0: 1000 on nft, never on legacy; negative: never.
	RewriteTablesAbove int
	// Conntrack deletes stale UDP conntrack entries after a sync; nil
	// disables that.
	Conntrack conntrack.Cleaner
	// Logger receives skips and sync summaries; nil discards.
	Logger *slog.Logger
	// Generation returns the nf_tables ruleset generation of the node's
	// namespace (nftgen.Reader.Generation). On iptables-nft it lets
	// CheckDrift skip the read-back while nothing changed (drift.go).
	Generation func(context.Context) (uint32, error)
	// LegacyInfo returns the x_tables info of an iptables (ipv6:
	// ip6tables) table of the node's namespace (xtinfo.Reader.Info), the
	// same on iptables-legacy. Without the one the flavour uses, every
	// check reads back.
	LegacyInfo func(ctx context.Context, ipv6 bool, table string) (xtinfo.Info, error)
}

// Dataplane programs one node's namespace with iptables. It implements
// dataplane.Dataplane.
type Dataplane struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	flavour xtables.Flavour
	state   map[dataplane.Family]*famState // nil entry: next sync of the family is full
	udp     map[dataplane.Family]map[string]conntrack.UDPPort
	memos   map[dataplane.Family]*Memo
	// hairpin holds the hairpin set members last applied per family; nil
	// entry: read the set back on the next sync.
	hairpin map[dataplane.Family]map[string]struct{}
	stats   dataplane.SyncStats

	// Drift checks (drift.go): the mark known to go with what state
	// says (when markKnown), the table blocks the current Apply
	// committed, the hash of the last read-back found clean since the
	// last Apply, and the families found drifted (their next Apply is
	// full).
	mark      mark
	markKnown bool
	commits   int
	clean     map[dataplane.Family][32]byte
	relearn   map[dataplane.Family]bool
}

var _ dataplane.Dataplane = (*Dataplane)(nil)

// New returns a Dataplane; it touches nothing until Apply or Cleanup.
func New(cfg Config) (*Dataplane, error) {
	if cfg.Runner == nil {
		return nil, errors.New("iptables: Config.Runner is required")
	}
	if len(cfg.Families) == 0 {
		cfg.Families = []dataplane.Family{dataplane.IPv4, dataplane.IPv6}
	}
	if cfg.ShardBits == 0 {
		cfg.ShardBits = DefaultShardBits
	}
	if cfg.ShardBits < 1 || cfg.ShardBits > 8 {
		return nil, fmt.Errorf("iptables: ShardBits %d out of range 1..8", cfg.ShardBits)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dataplane{cfg: cfg, log: log, flavour: cfg.Flavour, state: map[dataplane.Family]*famState{},
		udp: map[dataplane.Family]map[string]conntrack.UDPPort{}, memos: map[dataplane.Family]*Memo{},
		hairpin: map[dataplane.Family]map[string]struct{}{}, clean: map[dataplane.Family][32]byte{}, relearn: map[dataplane.Family]bool{}}, nil
}

// Mode implements dataplane.Dataplane.
func (d *Dataplane) Mode() string { return "iptables" }

// LastSync returns statistics of the last Apply.
func (d *Dataplane) LastSync() dataplane.SyncStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

func (d *Dataplane) renderOptions() RenderOptions {
	return RenderOptions{ShardBits: d.cfg.ShardBits}
}

// Flavour is the iptables back end the mode programs: FlavourAuto until
// its first sync detected it. For the caller of Apply only.
func (d *Dataplane) Flavour() xtables.Flavour { return d.flavour }

func (d *Dataplane) ensureFlavour(ctx context.Context) error {
	if d.flavour != xtables.FlavourAuto {
		return nil
	}
	fl, err := xtables.DetectFlavour(ctx, d.cfg.Runner)
	if err != nil {
		return err
	}
	d.flavour = fl
	d.log.Info("iptables flavour detected", "flavour", string(fl))
	return nil
}

// Apply implements dataplane.Dataplane. A partial sync of a family
// renders only the services whose view changed (looking only at those
// opts.Changed names, when set) and writes only the chains that differ
// from the last successful Apply (incremental.go); with opts.Full, when
// the family has not been synced yet, or when the node's settings
// changed, the family is rendered in full, and a full sync writes every
// chain that differs from a kernel read-back.
func (d *Dataplane) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	if st == nil {
		return errors.New("iptables: nil state")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.ensureFlavour(ctx); err != nil {
		return fmt.Errorf("iptables apply: %w", err)
	}
	d.stats = dataplane.SyncStats{}
	before, markOK := d.markBefore(ctx)
	var errs []error
	for _, fam := range d.cfg.Families {
		delete(d.clean, fam) // what a check found clean was the old state
		err := d.applyFamily(ctx, st, fam, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables apply %s: %w", fam, err))
		}
		if err != nil && !dataplane.IsConntrackError(err) {
			delete(d.state, fam)
			delete(d.hairpin, fam)
			markOK = false
			continue
		}
		delete(d.relearn, fam) // the rules are written
	}
	d.settleMark(ctx, before, markOK)
	return errors.Join(errs...)
}

func (d *Dataplane) applyFamily(ctx context.Context, st *dataplane.State, fam dataplane.Family, opts dataplane.ApplyOptions) error {
	memo := d.memos[fam]
	if memo == nil {
		memo = &Memo{}
		d.memos[fam] = memo
	}
	cur := d.state[fam]
	if d.relearn[fam] {
		opts.Full = true // a check found drift: read back, rewrite what differs
	}
	if !opts.Full && cur != nil && cur.idx != nil && d.hairpin[fam] != nil {
		r := newRenderer(fam, d.renderOptions())
		r.readNode(st)
		r.fixedChains()
		if changes, ok := r.changes(st, memo, opts.Changed); ok {
			return d.applyChanges(ctx, fam, r, cur, memo, changes)
		}
	}
	// Jumps are checked below, over what this sync writes.
	rs, err := render(st, fam, d.renderOptions(), memo, false)
	if err != nil {
		return err
	}
	for _, s := range rs.Skips {
		d.log.Warn("skipped input", "family", fam.String(), "service", s.Service, "reason", s.Reason)
	}
	full := opts.Full || cur == nil
	next := &famState{rs: rs, idx: buildIndex(memo)}
	stale := conntrack.Stale(d.udp[fam], rs.udp)
	var p syncPlan
	if full {
		if err := rs.Validate(); err != nil {
			return fmt.Errorf("render %s: %w", fam, err)
		}
	}
	// The set must exist, and hold new endpoints, before any restore
	// matches it or DNATs to them.
	hp, err := d.planHairpin(ctx, fam, rs, full)
	if err != nil {
		return err
	}
	if err := d.ipsetRestore(ctx, hp.Pre); err != nil {
		return fmt.Errorf("hairpin set, before rules: %w", err)
	}
	if full {
		var rewritten bool
		if p, rewritten, err = d.planFullSync(ctx, fam, rs); err != nil {
			return err
		}
		if rewritten {
			return d.finish(ctx, fam, next, p, hp, stale)
		}
	} else {
		p = planPartial(cur.rs, rs)
		if err := rs.validate(p.write); err != nil {
			return fmt.Errorf("render %s: %w", fam, err)
		}
	}
	if !p.empty() {
		for _, payload := range p.payloads(rs, d.maxChains()) {
			if err := d.restore(ctx, fam, payload); err != nil {
				return err
			}
			d.stats.Restores++
		}
	}
	return d.finish(ctx, fam, next, p, hp, stale)
}

// planFullSync reads the tables back and plans a full sync. When the plan
// calls for it, it replaces whole tables right away and reports done.
func (d *Dataplane) planFullSync(ctx context.Context, fam dataplane.Family, rs *Ruleset) (p syncPlan, done bool, err error) {
	saved, opaque, err := d.readBack(ctx, fam)
	if err != nil {
		return p, false, err
	}
	p = planFull(readKernel(saved), rs)
	if !shouldRewrite(p, rs, opaque, d.rewriteAbove()) {
		return p, false, nil
	}
	// The rewrite commits the transitional filter table, then nat; the
	// final filter chains follow with --noflush (phases).
	ph := p.phases(rs)
	err = d.rewrite(ctx, fam, rewritePayload(saved, rs, p.transitional(ph)))
	if err == nil {
		for _, payload := range payloads(rs, ph[2:], 0) {
			if err := d.restore(ctx, fam, payload); err != nil {
				return p, false, fmt.Errorf("after the table rewrite: %w", err)
			}
			d.stats.Restores++
		}
		return p, true, nil
	}
	if ctx.Err() != nil {
		return p, false, err
	}
	// Each COMMIT is its own transaction, so the failed restore may have
	// replaced some tables: plan the batched --noflush path from a fresh
	// read-back.
	d.log.Warn("whole-table rewrite failed, writing in batches", "family", fam.String(), "error", err)
	if saved, _, err = d.readBack(ctx, fam); err != nil {
		return p, false, err
	}
	return planFull(readKernel(saved), rs), false, nil
}

func (d *Dataplane) readBack(ctx context.Context, fam dataplane.Family) (map[string]*xtables.SavedTable, bool, error) {
	out, err := d.cfg.Runner.Run(ctx, []string{d.flavour.SaveCmd(fam)}, nil)
	if err != nil {
		return nil, false, fmt.Errorf("read back: %w", err)
	}
	saved, opaque := xtables.ParseSave(out)
	return saved, opaque, nil
}

// finish deletes the hairpin members of gone endpoints (no rule DNATs
// to them any more), records next as the family's applied state and
// deletes stale UDP conntrack entries.
func (d *Dataplane) finish(ctx context.Context, fam dataplane.Family, next *famState, p syncPlan, hp ipset.Changes, stale []conntrack.Flow) error {
	if err := d.ipsetRestore(ctx, hp.Post); err != nil {
		return fmt.Errorf("hairpin set, after rules: %w", err)
	}
	d.stats.HairpinAdded += hp.Added
	d.stats.HairpinRemoved += hp.Removed
	d.hairpin[fam] = next.rs.hairpin
	d.stats.ChainsWritten += p.written
	for _, rm := range p.remove {
		d.stats.ChainsRemoved += len(rm)
	}
	d.state[fam] = next
	d.udp[fam] = next.rs.udp
	if d.cfg.Conntrack != nil && len(stale) > 0 {
		// The rules are in place; a failure here leaves stale flows, not
		// broken rules, so it is reported without forcing a full resync.
		if err := d.cfg.Conntrack.DeleteUDP(ctx, dataplane.Family(fam), stale); err != nil {
			return &dataplane.ConntrackError{Err: err}
		}
	}
	return nil
}

func (d *Dataplane) maxChains() int {
	if d.cfg.MaxChainsPerRestore != 0 || d.flavour != xtables.FlavourNFT {
		return d.cfg.MaxChainsPerRestore
	}
	return 5000
}

func (d *Dataplane) rewriteAbove() int {
	switch {
	case d.cfg.RewriteTablesAbove != 0:
		return d.cfg.RewriteTablesAbove
	case d.flavour != xtables.FlavourNFT:
		return -1
	}
	return defaultRewriteAbove
}

// rewrite replaces whole tables: iptables-restore without --noflush
// flushes every table named in payload and deletes its chains first.
func (d *Dataplane) rewrite(ctx context.Context, fam dataplane.Family, payload string) error {
	argv := []string{d.flavour.RestoreCmd(fam), "-w"}
	if _, err := d.cfg.Runner.Run(ctx, argv, []byte(payload)); err != nil {
		return fmt.Errorf("rewrite tables: %w", err)
	}
	d.commits += committedBlocks(payload)
	d.stats.Restores++
	d.stats.TableRewrites++
	return nil
}

func (d *Dataplane) restore(ctx context.Context, fam dataplane.Family, payload string) error {
	argv := []string{d.flavour.RestoreCmd(fam), "-w", "--noflush"}
	if _, err := d.cfg.Runner.Run(ctx, argv, []byte(payload)); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	d.commits += committedBlocks(payload)
	return nil
}
