package nftables

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/nftgen"
)

// Drift checks (dataplane.DriftChecker). The cheap half is the nf_tables
// ruleset generation of the node's namespace (package nftgen): every
// commit by anyone bumps it by one, so a check that finds the generation
// it recorded as its baseline reports no drift after one small netlink
// exchange. Otherwise the tables are read back over netlink
// (netlink_read.go) and compared with what the last successful Apply
// left (drift_rules.go, drift_elements.go).
//
// The baseline only ever moves over commits that are known to be ours
// or that a read-back found harmless: Apply reads the generation before
// and after its transactions and advances the baseline when the
// difference is exactly the number of transactions it committed and the
// reading before was the baseline. A foreign commit between two of ours,
// or before an Apply, thus leaves the baseline unknown and the next check
// reads back; nothing is missed for want of a race. A check that reads
// back records the generation it read before the read-back (a commit
// during it means a second read-back, then the next check's).

var _ dataplane.DriftChecker = (*Dataplane)(nil)

// tableReader reads one family's table back; nil, nil: no table. The
// real one is netlinkReader; unit tests read a knftables.Fake.
type tableReader interface {
	readTable(fam dataplane.Family) (*kernelTable, error)
}

// driftSeams sets the generation and read-back seams from cfg: the
// given Generation, else both over the PartialNetlink dialer.
func (d *Dataplane) driftSeams() {
	d.genRead = d.cfg.Generation
	if d.cfg.PartialNetlink == nil {
		return
	}
	d.reader = netlinkReader{dial: d.cfg.PartialNetlink, table: d.cfg.Table}
	if d.genRead == nil {
		dial := d.cfg.PartialNetlink
		d.genRead = nftgen.NewReader(func() (*netlink.Conn, error) {
			_, raw, err := dialRaw(dial) // the socket outlives the unused google/nftables Conn
			return raw, err
		}).Generation
	}
}

// CheckDrift implements dataplane.DriftChecker. It needs a generation
// and a read-back (Config.PartialNetlink); without them it returns an
// error wrapping errors.ErrUnsupported.
func (d *Dataplane) CheckDrift(ctx context.Context) (dataplane.Drift, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.applied) == 0 {
		return dataplane.Drift{}, nil
	}
	if d.genRead == nil || d.reader == nil {
		return dataplane.Drift{}, fmt.Errorf("nftables drift check needs Config.PartialNetlink: %w", errors.ErrUnsupported)
	}
	g, err := d.genRead(ctx)
	if err != nil {
		return dataplane.Drift{}, fmt.Errorf("nftables drift check: %w", err)
	}
	if d.genKnown && g == d.gen {
		return dataplane.Drift{}, nil
	}
	d.genKnown = false
	for attempt := 0; ; attempt++ {
		dr, drifted, err := d.readBack(ctx)
		if err != nil {
			return dr, fmt.Errorf("nftables drift check: %w", err)
		}
		after, err := d.genRead(ctx)
		if err != nil {
			return dr, fmt.Errorf("nftables drift check: %w", err)
		}
		if after != g && attempt == 0 {
			g = after // a commit during the read-back: read again
			continue
		}
		for _, fam := range drifted {
			d.relearn[fam] = true
		}
		if after == g && !dr.Drifted() {
			d.gen, d.genKnown = g, true
		}
		return dr, nil
	}
}

// readBack compares every applied family's table with the kernel's and
// returns the families that differ.
func (d *Dataplane) readBack(ctx context.Context) (dataplane.Drift, []dataplane.Family, error) {
	dr := dataplane.Drift{ReadBack: true}
	var drifted []dataplane.Family
	for _, fam := range d.cfg.Families {
		want := d.applied[fam]
		if want == nil {
			continue // its next Apply is full and lists the table anyway
		}
		if err := ctx.Err(); err != nil {
			return dr, nil, err
		}
		got, err := d.reader.readTable(fam)
		if err != nil {
			return dr, nil, fmt.Errorf("read back %s: %w", fam, err)
		}
		before := driftCount(dr)
		compareTable(fam, d.cfg.Table, want, got, &dr)
		compareFlowtable(fam, d.cfg.Table, want.Flowtable, d.flowDev[fam], got, &dr)
		if driftCount(dr) > before {
			drifted = append(drifted, fam)
		}
	}
	return dr, drifted, nil
}

// driftCount is the number of objects dr counts.
func driftCount(dr dataplane.Drift) int {
	n := 0
	for _, c := range dr.Kinds {
		n += c
	}
	return n
}

// compareTable adds to dr what differs between the applied ruleset and
// the kernel table. Only the table's own objects exist here: nothing of
// other tables is read.
func compareTable(fam dataplane.Family, table string, want *Ruleset, got *kernelTable, dr *dataplane.Drift) {
	where := string(nftFamily(fam)) + " " + table
	if got == nil {
		dr.Add(dataplane.DriftTable, where)
		return
	}
	for _, n := range sorted.Keys(want.Chains) {
		c, k := want.Chains[n], got.chains[n]
		switch {
		case k == nil:
			dr.Add(dataplane.DriftChain, where+" "+n+": missing")
		case k.base != baseOf(c):
			dr.Add(dataplane.DriftChain, fmt.Sprintf("%s %s: hook %q, want %q", where, n, k.base, baseOf(c)))
		case !sameRules(c.Rules, k.rules):
			dr.Add(dataplane.DriftRule, fmt.Sprintf("%s %s: %d rules, want %d or they differ", where, n, len(k.rules), len(c.Rules)))
		}
	}
	for _, n := range sorted.Keys(got.chains) {
		if want.Chains[n] == nil {
			dr.Add(dataplane.DriftChain, where+" "+n+": not ours")
		}
	}
	for _, n := range sorted.Keys(want.Sets) {
		s, k := want.Sets[n], got.sets[n]
		switch {
		case k == nil:
			dr.Add(dataplane.DriftSet, where+" "+n+": missing")
		case k.isMap != s.Map || k.interval != isInterval(s) || k.dynamic != s.Dynamic:
			dr.Add(dataplane.DriftSet, where+" "+n+": of another kind")
		default:
			compareElements(fam, where, s, want.Elements[n], k, dr)
		}
	}
	for _, n := range sorted.Keys(got.sets) {
		if want.Sets[n] == nil {
			dr.Add(dataplane.DriftSet, where+" "+n+": not ours")
		}
	}
}

// compareElements adds one DriftElement per element missing from or
// extra in a set. A set whose elements cannot be put in comparable form
// is compared by its element count.
func compareElements(fam dataplane.Family, where string, s *Set, elems map[string]string, k *kernelSet, dr *dataplane.Drift) {
	want, text, err := wantElements(fam, s, elems)
	if err != nil {
		n := 0
		for _, e := range k.elems {
			if !e.end {
				n++
			}
		}
		if n != len(elems) {
			dr.Add(dataplane.DriftElement, fmt.Sprintf("%s %s: %d elements, want %d", where, s.Name, n, len(elems)))
		}
		return
	}
	missing, extra := diffSorted(want, gotElements(s, k))
	for _, e := range missing {
		t, ok := text[e]
		if !ok {
			t = elemLabel(s, e)
		}
		dr.Add(dataplane.DriftElement, where+" "+s.Name+": missing "+t)
	}
	for _, e := range extra {
		dr.Add(dataplane.DriftElement, where+" "+s.Name+": not ours "+elemLabel(s, e))
	}
}

// diffSorted returns what a has and b lacks, and what b has and a lacks,
// of two sorted lists (as multisets).
func diffSorted(a, b []string) (onlyA, onlyB []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			onlyA = append(onlyA, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			onlyB = append(onlyB, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return onlyA, onlyB
}

// generationBefore reads the generation before an Apply; ok is false when
// there is no baseline to advance from.
func (d *Dataplane) generationBefore(ctx context.Context) (uint32, bool) {
	if d.genRead == nil || !d.genKnown {
		return 0, false
	}
	g, err := d.genRead(ctx)
	if err != nil || g != d.gen {
		d.genKnown = false // something committed since the baseline
		return 0, false
	}
	return g, true
}

// settleGeneration advances the baseline after an Apply whose commits
// were all ours: the generation moved by exactly the transactions it
// ran since before. Anything else leaves the baseline unknown, and the
// next check reads back.
func (d *Dataplane) settleGeneration(ctx context.Context, before uint32, ok bool) {
	if !ok {
		d.genKnown = false
		return
	}
	after, err := d.genRead(ctx)
	if err != nil || nftgen.Since(before, after) != uint32(d.stats.Transactions) {
		d.genKnown = false
		return
	}
	d.gen = after
}

// compareFlowtable adds to dr a flowtable that is missing, one that is
// not the mode's, and a device the kernel's holds that the mode did not
// add. A device the mode added and the kernel lacks is no drift: the
// kernel drops an interface that goes away from every flowtable by
// itself, before the agent's link watch brings the sync that forgets
// it.
func compareFlowtable(fam dataplane.Family, table, want string, devs map[string]bool, got *kernelTable, dr *dataplane.Drift) {
	if got == nil {
		return // compareTable reported the table
	}
	where := string(nftFamily(fam)) + " " + table
	for _, n := range sorted.Keys(got.flowtables) {
		if n != want {
			dr.Add(dataplane.DriftFlowtable, where+" "+n+": not ours")
			continue
		}
		for _, dev := range got.flowtables[n] {
			if !devs[dev] {
				dr.Add(dataplane.DriftFlowtable, where+" "+n+": device "+dev+" not ours")
			}
		}
	}
	if _, ok := got.flowtables[want]; want != "" && !ok {
		dr.Add(dataplane.DriftFlowtable, where+" "+want+": missing")
	}
}
