package nftables

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
)

// Config configures a Dataplane.
type Config struct {
	// Runner runs nft in the node's network namespace. Required unless
	// Interfaces has an entry for every family.
	Runner Runner
	// Interfaces replaces, per family, the nft adapter built on Runner
	// (knftables.NewFake in unit tests).
	Interfaces map[Family]knftables.Interface
	// Families to program; default IPv4 and IPv6.
	Families []Family
	// Table is the table name in each family; default DefaultTable.
	Table string
	// Conntrack deletes stale UDP conntrack entries after a sync; nil
	// disables that.
	Conntrack conntrack.Cleaner
	// Logger receives skips and sync summaries; nil discards.
	Logger *slog.Logger
}

// Dataplane programs one node's namespace with nftables. It implements
// dataplane.Dataplane.
type Dataplane struct {
	cfg Config
	log *slog.Logger
	nft map[Family]knftables.Interface

	mu sync.Mutex
	// applied is the ruleset of the last successful transaction per
	// family; nil: the next sync of the family is full and first lists
	// the kernel table.
	applied map[Family]*Ruleset
	// resetBase is done once per family per process (see planFull).
	baseReset map[Family]bool
	// udp is the UDP ports of the last successful sync, kept across a
	// failed one so conntrack cleanup still sees what went away.
	udp   map[Family]map[string]conntrack.UDPPort
	stats SyncStats
}

// SyncStats describes the last Apply, summed over families, for tests,
// benchmarks and metrics.
type SyncStats struct {
	Transactions    int
	Operations      int // commands in the transactions
	ChainsWritten   int
	ChainsRemoved   int
	ElementsAdded   int
	ElementsDeleted int
	Full            bool
}

var _ dataplane.Dataplane = (*Dataplane)(nil)

// New returns a Dataplane; it touches nothing until Apply or Cleanup.
func New(cfg Config) (*Dataplane, error) {
	if len(cfg.Families) == 0 {
		cfg.Families = []Family{IPv4, IPv6}
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	nft := map[Family]knftables.Interface{}
	for _, f := range cfg.Families {
		if f != IPv4 && f != IPv6 {
			return nil, fmt.Errorf("nftables: unknown family %d", f)
		}
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
	return &Dataplane{cfg: cfg, log: log, nft: nft, applied: map[Family]*Ruleset{}, baseReset: map[Family]bool{},
		udp: map[Family]map[string]conntrack.UDPPort{}}, nil
}

// Mode implements dataplane.Dataplane.
func (d *Dataplane) Mode() string { return "nftables" }

// LastSync returns statistics of the last Apply.
func (d *Dataplane) LastSync() SyncStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// Apply implements dataplane.Dataplane. Each family is rendered in full
// and written in one transaction holding only what differs from the last
// successful one; with opts.Full (or when the family has not been synced
// by this process, or its last sync failed) the transaction rewrites the
// whole table instead. An identical state runs no transaction at all.
func (d *Dataplane) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	if st == nil {
		return errors.New("nftables: nil state")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats = SyncStats{Full: opts.Full}
	var errs []error
	for _, fam := range d.cfg.Families {
		if err := d.applyFamily(ctx, st, fam, opts.Full); err != nil {
			if !IsConntrackError(err) {
				delete(d.applied, fam)
			}
			errs = append(errs, fmt.Errorf("nftables apply %s: %w", fam, err))
		}
	}
	return errors.Join(errs...)
}

func (d *Dataplane) applyFamily(ctx context.Context, st *dataplane.State, fam Family, full bool) error {
	next, err := Render(st, fam)
	if err != nil {
		return err
	}
	for _, s := range next.Skips {
		d.log.Warn("skipped input", "family", fam.String(), "service", s.Service, "reason", s.Reason)
	}
	nft := d.nft[fam]
	tx := nft.NewTransaction()
	prev := d.applied[fam]
	var ps planStats
	if full || prev == nil {
		var existing tableObjects
		if prev == nil {
			// Restart or failure: learn what the kernel table holds, so
			// leftovers of an earlier state are removed.
			if existing, err = listTable(ctx, nft); err != nil {
				return err
			}
		} else {
			// A periodic resync within this process: what we applied is
			// known; the rewrite repairs drift in it.
			existing = tableObjects{chains: sortedKeys(prev.Chains)}
			for _, n := range sortedKeys(prev.Sets) {
				if prev.Sets[n].Map {
					existing.maps = append(existing.maps, n)
				} else {
					existing.sets = append(existing.sets, n)
				}
			}
		}
		ps = planFull(tx, next, existing, !d.baseReset[fam])
		d.stats.Full = true
	} else {
		ps = planPartial(tx, prev, next)
	}
	if n := tx.NumOperations(); n > 0 {
		if err := nft.Run(ctx, tx); err != nil {
			return fmt.Errorf("transaction of %d operations: %w", n, err)
		}
		d.stats.Transactions++
		d.stats.Operations += n
	}
	d.baseReset[fam] = true
	d.stats.ChainsWritten += ps.chainsWritten
	d.stats.ChainsRemoved += ps.chainsRemoved
	d.stats.ElementsAdded += ps.elementsAdded
	d.stats.ElementsDeleted += ps.elementsDeled
	d.applied[fam] = next
	return d.cleanConntrack(ctx, fam, next)
}

// listTable returns the chains, sets and maps of the kernel table; none
// when it does not exist.
func listTable(ctx context.Context, nft knftables.Interface) (tableObjects, error) {
	var t tableObjects
	for _, k := range []struct {
		kind string
		dst  *[]string
	}{{"chain", &t.chains}, {"set", &t.sets}, {"map", &t.maps}} {
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
func (d *Dataplane) cleanConntrack(ctx context.Context, fam Family, next *Ruleset) error {
	stale := conntrack.Stale(d.udp[fam], next.udp)
	d.udp[fam] = next.udp
	if d.cfg.Conntrack == nil || len(stale) == 0 {
		return nil
	}
	if err := d.cfg.Conntrack.DeleteUDP(ctx, conntrack.Family(fam), stale); err != nil {
		return &ConntrackError{Err: err}
	}
	return nil
}

// Cleanup implements dataplane.Dataplane: it deletes this mode's table in
// every family. The table is ours alone, so nothing else is touched.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, fam := range d.cfg.Families {
		delete(d.applied, fam)
		delete(d.baseReset, fam)
		delete(d.udp, fam)
		nft := d.nft[fam]
		tx := nft.NewTransaction()
		// Add first so the delete succeeds whether or not it exists.
		tx.Add(&knftables.Table{})
		tx.Delete(&knftables.Table{})
		if err := nft.Run(ctx, tx); err != nil {
			errs = append(errs, fmt.Errorf("nftables cleanup %s: %w", fam, err))
		}
	}
	return errors.Join(errs...)
}

// ConntrackError is an Apply whose rules were written but whose stale UDP
// conntrack entries could not all be deleted.
type ConntrackError struct{ Err error }

func (e *ConntrackError) Error() string { return "conntrack cleanup: " + e.Err.Error() }

func (e *ConntrackError) Unwrap() error { return e.Err }

// IsConntrackError reports whether err is, or wraps, a ConntrackError.
func IsConntrackError(err error) bool {
	var ce *ConntrackError
	return errors.As(err, &ce)
}
