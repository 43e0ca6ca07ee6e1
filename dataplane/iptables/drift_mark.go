package iptables

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftgen"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// mark is the cheap fingerprint of the kernel state (see drift.go): the
// nf_tables generation on iptables-nft, the x_tables info of the nat and
// filter tables of every family on iptables-legacy.
type mark struct {
	gen    uint32
	tables string
}

// markTables are the tables whose x_tables info a legacy mark holds:
// the ones this mode writes.
var markTables = []string{tableNAT, tableFilter}

// readMark reads the mark; cheap is false when the flavour has no mark
// configured, and every check reads back.
func (d *Dataplane) readMark(ctx context.Context) (m mark, cheap bool, err error) {
	switch {
	case d.flavour == xtables.FlavourNFT && d.cfg.Generation != nil:
		m.gen, err = d.cfg.Generation(ctx)
		return m, true, err
	case d.flavour == xtables.FlavourLegacy && d.cfg.LegacyInfo != nil:
		var b strings.Builder
		for _, fam := range d.cfg.Families {
			if d.state[fam] == nil {
				continue // nothing of ours to watch (yet, or after a failure)
			}
			for _, t := range markTables {
				in, err := d.cfg.LegacyInfo(ctx, fam == dataplane.IPv6, t)
				if err != nil {
					return m, true, fmt.Errorf("%s %s: %w", d.flavour.Binary(fam), t, err)
				}
				fmt.Fprintf(&b, "%s/%s:%v;", fam, t, in)
			}
		}
		m.tables = b.String()
		return m, true, nil
	}
	return m, false, nil
}

// markBefore reads the mark before an Apply; ok is false when there is
// no baseline to move from (none yet, or something changed since).
func (d *Dataplane) markBefore(ctx context.Context) (mark, bool) {
	d.commits = 0
	if !d.markKnown {
		return mark{}, false
	}
	m, cheap, err := d.readMark(ctx)
	if err != nil || !cheap || m != d.mark {
		d.markKnown = false
		return mark{}, false
	}
	return m, true
}

// settleMark moves the baseline after an Apply from before (ok) to the
// mark now: on nft only when the generation moved by exactly the table
// blocks this Apply committed; on legacy, which counts nothing, always.
// Otherwise the baseline is forgotten and the next check reads back.
func (d *Dataplane) settleMark(ctx context.Context, before mark, ok bool) {
	if !ok {
		d.markKnown = false
		return
	}
	after, _, err := d.readMark(ctx)
	if err != nil || d.flavour == xtables.FlavourNFT && nftgen.Since(before.gen, after.gen) != uint32(d.commits) {
		d.markKnown = false
		return
	}
	d.mark = after
}
