package nftables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"

	gnft "github.com/google/nftables"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// Config configures a Dataplane.
type Config struct {
	// Runner runs nft in the node's network namespace. Required unless
	// Interfaces has an entry for every family.
	Runner command.Runner
	// Interfaces replaces, per family, the nft adapter built on Runner
	// (knftables.NewFake in unit tests).
	Interfaces map[dataplane.Family]knftables.Interface
	// Families to program; default IPv4 and IPv6.
	Families []dataplane.Family
	// Table is the table name in each family; default DefaultTable.
	Table string
	// Conntrack deletes stale UDP conntrack entries after a sync; nil
	// disables that.
	Conntrack conntrack.Cleaner
	// Logger receives skips and sync summaries; nil discards.
	Logger *slog.Logger
	// PartialNetlink, when set, sends partial syncs over netlink
	// (google/nftables) through a connection it opens in the node's
	// namespace, instead of running nft: nft 1.0.6 loads every chain name
	// of the family before an "add rule", so its cost grows with the
	// table. It also lists the kernel table before a first full sync.
	// Full syncs always run nft. A partial transaction holding an
	// operation the translator does not know runs nft instead
	// (dataplane.SyncStats.NetlinkFallbacks). Off (nil) by default. CheckDrift
	// reads the tables back through it too, and without Generation
	// reads the generation over it.
	PartialNetlink NetlinkDialer
	// Generation returns the nf_tables ruleset generation of the node's
	// namespace (nftgen.Reader.Generation), the cheap half of CheckDrift;
	// nil: read over PartialNetlink.
	Generation func(context.Context) (uint32, error)
}

// Dataplane programs one node's namespace with nftables. It implements
// dataplane.Dataplane.
type Dataplane struct {
	cfg Config
	log *slog.Logger
	nft map[dataplane.Family]knftables.Interface

	mu sync.Mutex
	// applied is the ruleset of the last successful transaction per
	// family; nil: the next sync of the family is full and first lists
	// the kernel table.
	applied map[dataplane.Family]*Ruleset
	// resetBase is done once per family per process (see planFull).
	baseReset map[dataplane.Family]bool
	// udp is the UDP ports of the last successful sync, kept across a
	// failed one so conntrack cleanup still sees what went away.
	udp map[dataplane.Family]map[string]conntrack.UDPPort
	// memo keeps each family's rendered services between syncs; owners
	// the services behind each shared element of the applied ruleset.
	memo   map[dataplane.Family]*Memo
	owners map[dataplane.Family]*owners
	stats  dataplane.SyncStats

	// Drift checks (drift.go): the generation reader, the read-back, the
	// generation known to hold only what applied says (when genKnown)
	// and the families a check found drifted, whose next Apply is full
	// and lists the kernel table instead of trusting applied.
	genRead  func(context.Context) (uint32, error)
	reader   tableReader
	gen      uint32
	genKnown bool
	relearn  map[dataplane.Family]bool

	// The flowtable (flowtable.go): per family, the probe's verdict
	// ("" the kernel has flowtables, else why not; absent: not probed)
	// and the devices the kernel's flowtable holds.
	flowUnsupported map[dataplane.Family]string
	flowDev         map[dataplane.Family]map[string]bool
}

var _ dataplane.Dataplane = (*Dataplane)(nil)

// New returns a Dataplane; it touches nothing until Apply or Cleanup.
func New(cfg Config) (*Dataplane, error) {
	fams, err := dataplane.Families(cfg.Families)
	if err != nil {
		return nil, fmt.Errorf("nftables: %w", err)
	}
	cfg.Families = fams
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	nft := map[dataplane.Family]knftables.Interface{}
	for _, f := range cfg.Families {
		switch {
		case cfg.Interfaces[f] != nil:
			nft[f] = cfg.Interfaces[f]
		case cfg.Runner != nil:
			nft[f] = NewExecInterface(cfg.Runner, f, cfg.Table)
		default:
			return nil, errors.New("nftables: Config.Runner is required")
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dataplane{cfg: cfg, log: log, nft: nft, applied: map[dataplane.Family]*Ruleset{}, baseReset: map[dataplane.Family]bool{},
		udp: map[dataplane.Family]map[string]conntrack.UDPPort{}, memo: map[dataplane.Family]*Memo{}, owners: map[dataplane.Family]*owners{},
		relearn: map[dataplane.Family]bool{}, flowUnsupported: map[dataplane.Family]string{}, flowDev: map[dataplane.Family]map[string]bool{}}
	d.driftSeams()
	return d, nil
}

// Mode implements dataplane.Dataplane.
func (d *Dataplane) Mode() string { return "nftables" }

// LastSync returns statistics of the last Apply.
func (d *Dataplane) LastSync() dataplane.SyncStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Apply implements dataplane.Dataplane. A partial sync of a family
// renders only the services whose view changed (looking only at those
// opts.Changed names, when set) and writes one transaction holding only
// what differs from the last successful one; with opts.Full (or when the
// family has not been synced by this process, its last sync failed or
// the node's settings changed) the family is rendered in full, and a
// full sync's transaction rewrites the whole table. An identical state
// runs no transaction at all.
func (d *Dataplane) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	if st == nil {
		return errors.New("nftables: nil state")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = dataplane.SyncStats{Full: opts.Full}
	gen, genOK := d.generationBefore(ctx)
	var errs []error
	for _, fam := range d.cfg.Families {
		if err := d.applyFamily(ctx, st, fam, opts); err != nil {
			if !dataplane.IsConntrackError(err) {
				delete(d.applied, fam)
				delete(d.owners, fam)
				genOK = false
			}
			errs = append(errs, fmt.Errorf("nftables apply %s: %w", fam, err))
		}
	}
	d.settleGeneration(ctx, gen, genOK)
	return errors.Join(errs...)
}

func (d *Dataplane) applyFamily(ctx context.Context, st *dataplane.State, fam dataplane.Family, opts dataplane.ApplyOptions) error {
	full := opts.Full
	m := d.memo[fam]
	if m == nil {
		m = &Memo{}
		d.memo[fam] = m
	}
	prev := d.applied[fam]
	if d.relearn[fam] {
		// A drift check found the table changed behind our back: write it
		// whole from what the kernel holds now (listTable), as after a
		// restart, base chains included.
		full, prev = true, nil
		delete(d.baseReset, fam)
	}
	flow := d.flowWanted(ctx, st, fam, full || prev == nil)
	var devs []string
	if flow {
		devs = flowDevices(flowPatterns(st), st.Links)
		// A device that stays but no longer matches leaves only with
		// the flowtable, which a full sync recreates.
		full = full || d.flowStale(fam, devs, st.Links)
	}
	if !full && prev != nil && d.owners[fam] != nil && (prev.Flowtable != "") == flow {
		r := &renderer{fam: fam, rs: newRuleset(fam), flow: flow}
		r.readNode(st)
		if changes, ok := r.changes(st, m, opts.Changed); ok {
			err := d.applyChanges(ctx, fam, prev, m, changes, r.rs.Skips)
			if err == nil || dataplane.IsConntrackError(err) {
				d.syncFlowDevices(ctx, fam, prev, devs, st.Links, false)
			}
			return err
		}
	}
	next, err := render(st, fam, m, flow)
	if err != nil {
		return err
	}
	for _, s := range next.Skips {
		d.log.Warn("skipped input", "family", fam.String(), "service", s.Service, "reason", s.Reason)
	}
	nft := d.nft[fam]
	tx := nft.NewTransaction()
	var ps planStats
	// recreated: the transaction creates the flowtable anew, empty.
	recreated := next.Flowtable != "" && (prev == nil || prev.Flowtable == "")
	if full || prev == nil {
		recreated = next.Flowtable != ""
		var existing tableObjects
		if prev == nil {
			// Restart or failure: learn what the kernel table holds, so
			// leftovers of an earlier state are removed.
			if existing, err = d.listTable(ctx, fam, nft); err != nil {
				return err
			}
		} else {
			// A periodic resync within this process: what we applied is
			// known; the rewrite repairs drift in it.
			existing = tableObjects{chains: sorted.Keys(prev.Chains)}
			for _, n := range sorted.Keys(prev.Sets) {
				if prev.Sets[n].Map {
					existing.maps = append(existing.maps, n)
				} else {
					existing.sets = append(existing.sets, n)
				}
			}
			if prev.Flowtable != "" {
				existing.flowtables = []string{prev.Flowtable}
			}
		}
		ps = planFull(tx, next, existing, !d.baseReset[fam])
		d.stats.Full = true
		if err := d.run(ctx, fam, tx); err != nil {
			return err
		}
	} else {
		log := &opLog{tx: tx}
		ps = planPartial(log, prev, next)
		sets := func(n string) *Set {
			if s, ok := next.Sets[n]; ok {
				return s
			}
			return prev.Sets[n]
		}
		if err := d.runPartial(ctx, fam, log, sets); err != nil {
			return err
		}
	}
	d.baseReset[fam] = true
	delete(d.relearn, fam)
	d.count(ps)
	d.applied[fam] = next
	d.owners[fam] = buildOwners(m)
	d.syncFlowDevices(ctx, fam, next, devs, st.Links, recreated)
	stale := conntrack.Stale(d.udp[fam], next.udp)
	d.udp[fam] = next.udp
	return d.cleanConntrack(ctx, fam, stale)
}

// applyChanges is a partial sync of the changed services only (see
// incremental.go); the applied ruleset is updated in place once the
// transaction has committed.
func (d *Dataplane) applyChanges(ctx context.Context, fam dataplane.Family, applied *Ruleset, m *Memo, changes []change, nodeSkips []dataplane.Skip) error {
	for _, c := range changes {
		if c.New == nil {
			continue
		}
		for _, s := range c.New.rs.Skips {
			d.log.Warn("skipped input", "family", fam.String(), "service", s.Service, "reason", s.Reason)
		}
		if err := validateIn(c.New, c.New.rs, applied); err != nil {
			return fmt.Errorf("render %s: %w", fam, err)
		}
	}
	log := &opLog{tx: d.nft[fam].NewTransaction()}
	p := planIncremental(log, applied, d.owners[fam], changes)
	sets := func(n string) *Set {
		for _, c := range changes {
			if c.New != nil && c.New.rs.Sets[n] != nil {
				return c.New.rs.Sets[n]
			}
			if c.Old != nil && c.Old.rs.Sets[n] != nil {
				return c.Old.rs.Sets[n]
			}
		}
		return applied.Sets[n]
	}
	if err := d.runPartial(ctx, fam, log, sets); err != nil {
		return err
	}
	p.commit(applied, d.owners[fam], m, nodeSkips)
	d.baseReset[fam] = true
	d.count(p.stats)
	return d.cleanConntrack(ctx, fam, conntrack.Stale(p.udpOld, p.udpNew))
}

func (d *Dataplane) count(ps planStats) {
	d.stats.ChainsWritten += ps.chainsWritten
	d.stats.ChainsRemoved += ps.chainsRemoved
	d.stats.ElementsAdded += ps.elementsAdded
	d.stats.ElementsDeleted += ps.elementsDeled
}

// runPartial sends a partial transaction over netlink when configured
// and every operation translates, else through nft.
func (d *Dataplane) runPartial(ctx context.Context, fam dataplane.Family, log *opLog, sets func(string) *Set) error {
	tx := log.tx
	if n := tx.NumOperations(); n > 0 && d.cfg.PartialNetlink != nil {
		// What knftables refused to render, nft would refuse too.
		if _, err := txText(tx); err != nil {
			return err
		}
		t0 := time.Now()
		done, err := d.runNetlink(log.ops, fam, sets)
		d.stats.TxTime += time.Since(t0)
		if err != nil {
			return fmt.Errorf("netlink transaction of %d operations: %w", n, err)
		}
		if done {
			d.stats.Netlink++
			d.stats.Transactions++
			d.stats.Operations += n
			return nil
		}
	}
	return d.run(ctx, fam, tx)
}

// run runs a transaction through nft, if it holds anything.
func (d *Dataplane) run(ctx context.Context, fam dataplane.Family, tx *knftables.Transaction) error {
	n := tx.NumOperations()
	if n == 0 {
		return nil
	}
	t0 := time.Now()
	err := d.nft[fam].Run(ctx, tx)
	d.stats.TxTime += time.Since(t0)
	if err != nil {
		return fmt.Errorf("transaction of %d operations: %w", n, err)
	}
	d.stats.Transactions++
	d.stats.Operations += n
	return nil
}

// runNetlink sends a partial transaction over netlink. It returns false,
// having sent nothing, when an operation is not supported: the caller
// runs nft. An error is a failed transaction (nothing applied).
func (d *Dataplane) runNetlink(ops []op, fam dataplane.Family, sets func(string) *Set) (bool, error) {
	b, err := translate(ops, fam, d.cfg.Table, sets)
	if errors.Is(err, errNoNetlink) {
		d.log.Debug("partial sync runs nft", "family", fam.String(), "reason", err)
		d.stats.NetlinkFallbacks++
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c, err := d.cfg.PartialNetlink(gnft.AsLasting(), gnft.WithSockOptions(bigBuffers))
	if err != nil {
		return false, fmt.Errorf("open netlink: %w", err)
	}
	defer closeLater(c)
	runtime.LockOSThread() // so the thread's CPU time is this batch's
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	err = b.run(c)
	d.stats.NetlinkCPU += threadCPU() - cpu0
	return true, err
}

// threadCPU is the user+system time of the calling thread.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// listTable returns the chains, sets and maps of the kernel table; none
// when it does not exist. With a netlink dialer it asks the kernel
// directly, and nft only when that fails.
func (d *Dataplane) listTable(ctx context.Context, fam dataplane.Family, nft knftables.Interface) (tableObjects, error) {
	if d.cfg.PartialNetlink != nil {
		t, err := listNetlink(d.cfg.PartialNetlink, fam, d.cfg.Table)
		if err == nil {
			return t, nil
		}
		d.log.Debug("listing the table over netlink failed; running nft", "family", fam.String(), "err", err)
	}
	var t tableObjects
	for _, k := range []struct {
		kind string
		dst  *[]string
	}{{"chain", &t.chains}, {"set", &t.sets}, {"map", &t.maps}, {"flowtable", &t.flowtables}} {
		names, err := nft.List(ctx, k.kind)
		if err != nil && !IsNotFound(err) {
			return t, fmt.Errorf("list %ss: %w", k.kind, err)
		}
		*k.dst = names
	}
	return t, nil
}

// cleanConntrack deletes UDP conntrack entries the change left stale.
// The rules are in place; a failure here leaves stale flows, not broken
// rules, so it is reported without forcing a full resync.
func (d *Dataplane) cleanConntrack(ctx context.Context, fam dataplane.Family, stale []conntrack.Flow) error {
	if d.cfg.Conntrack == nil || len(stale) == 0 {
		return nil
	}
	if err := d.cfg.Conntrack.DeleteUDP(ctx, fam, stale); err != nil {
		return &dataplane.ConntrackError{Err: err}
	}
	return nil
}

// Cleanup implements dataplane.Dataplane: it deletes this mode's table in
// every family, whoever created it (this process or an earlier one). The
// table is ours alone, so nothing else is touched. Without the nft binary
// this mode cannot have programmed anything: that is no error.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, fam := range d.cfg.Families {
		delete(d.applied, fam)
		delete(d.owners, fam)
		delete(d.baseReset, fam)
		delete(d.udp, fam)
		delete(d.relearn, fam)
		delete(d.flowDev, fam)
		d.genKnown = false
		nft := d.nft[fam]
		tx := nft.NewTransaction()
		// Add first so the delete succeeds whether or not it exists.
		tx.Add(&knftables.Table{})
		tx.Delete(&knftables.Table{})
		switch err := nft.Run(ctx, tx); {
		case command.IsNotFound(err):
			d.log.Debug("no nft binary; nothing of the nftables mode here", "family", fam.String())
		case err != nil:
			errs = append(errs, fmt.Errorf("nftables cleanup %s: %w", fam, err))
		}
	}
	if len(errs) == 0 {
		d.log.Info("nftables tables removed (where present)", "table", d.cfg.Table)
	}
	return errors.Join(errs...)
}
