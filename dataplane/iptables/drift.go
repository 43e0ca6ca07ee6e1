package iptables

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// Drift checks (dataplane.DriftChecker).
//
// The cheap half (drift_mark.go) is a mark of the kernel state read
// without reading the rules. On iptables-nft, which writes nf_tables,
// it is the ruleset generation (Config.Generation, package nftgen):
// equal to the baseline, nothing committed since. The baseline moves
// as in the nftables mode: Apply reads the generation before and after
// and advances it when the difference is exactly the table blocks its
// restores committed (each non-empty "*table … COMMIT" block of
// iptables-nft-restore is one nf_tables transaction, an empty one
// commits nothing, ipset is not nf_tables). On iptables-legacy it is
// the x_tables info of our tables (Config.LegacyInfo, package xtinfo):
// entry count, blob size and chain offsets of nat and filter per
// family, one getsockopt each. Every legacy change replaces a table's
// blob, and one that adds, deletes or flushes a rule or chain changes
// its count or size; a rule replaced by one of the same encoded size
// does not, and is found by the periodic full resync. Legacy commits
// carry no counter, so Apply takes the mark read right after its last
// restore as the baseline: a foreign change in the microseconds between
// that restore and the read is missed until the full resync.
//
// Without a mark (no Generation on nft, no LegacyInfo on legacy) every
// check reads back: iptables-save, one process per family (legacy,
// measured: 0.18 s of CPU at 1,000 services, 0.75 s at 5,000). Its output,
// counters and comments left out, is hashed, and when the hash is the
// one a check already found clean since the last Apply, parsing and
// comparing are skipped.
//
// The read-back compares, per family, what a full sync repairs and
// nothing else: the owned chains of every table (missing, extra, rules
// different in canonical form, xtables.SameRules), the jumps from
// built-in chains (present by target, as planFull ensures them) and the
// hairpin set (`ipset save`: missing, members missing or extra). Foreign
// chains and foreign rules in built-in chains are never looked at. The
// hairpin set is read only with the tables: ipset is neither nf_tables
// nor x_tables, so a change to the set alone is found by the next
// read-back or by the periodic full resync.
//
// A family found drifted is marked: its next Apply is full, which reads
// the kernel back and rewrites what differs (and the hairpin set).

var _ dataplane.DriftChecker = (*Dataplane)(nil)

// CheckDrift implements dataplane.DriftChecker.
func (d *Dataplane) CheckDrift(ctx context.Context) (dataplane.Drift, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.state) == 0 {
		return dataplane.Drift{}, nil
	}
	m, cheap, err := d.readMark(ctx)
	if err != nil {
		return dataplane.Drift{}, fmt.Errorf("iptables drift check: %w", err)
	}
	if cheap && d.markKnown && m == d.mark {
		return dataplane.Drift{}, nil
	}
	d.markKnown = false
	dr := dataplane.Drift{ReadBack: true}
	for _, fam := range d.cfg.Families {
		if d.state[fam] == nil {
			continue // its next Apply is full anyway
		}
		before := driftCount(dr)
		if err := d.checkFamily(ctx, fam, &dr); err != nil {
			return dr, fmt.Errorf("iptables drift check %s: %w", fam, err)
		}
		if driftCount(dr) > before {
			d.relearn[fam] = true
		}
	}
	if cheap && !dr.Drifted() {
		// The mark read before the read-back: a change during it makes
		// the next check read back again.
		d.mark, d.markKnown = m, true
	}
	return dr, nil
}

func driftCount(dr dataplane.Drift) int {
	n := 0
	for _, c := range dr.Kinds {
		n += c
	}
	return n
}

// checkFamily reads one family back and adds what differs to dr.
func (d *Dataplane) checkFamily(ctx context.Context, fam dataplane.Family, dr *dataplane.Drift) error {
	rs := d.state[fam].rs
	out, err := d.cfg.Runner.Run(ctx, []string{d.flavour.SaveCmd(fam)}, nil)
	if err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	sum := saveHash(out)
	if d.clean[fam] != sum {
		before := driftCount(*dr)
		saved, _ := xtables.ParseSave(out)
		compareTables(fam, rs, readKernel(saved), dr)
		if driftCount(*dr) == before {
			d.clean[fam] = sum
		}
	}
	ks, err := ipset.SaveSet(ctx, d.cfg.Runner, rs.HairpinSet)
	if err != nil {
		return err
	}
	compareHairpin(rs, ks, dr)
	return nil
}

// counters are the packet and byte counters iptables-save prints after
// a chain's policy, which traffic changes.
var counters = regexp.MustCompile(` \[\d+:\d+\]$`)

// saveHash hashes iptables-save output without comments and counters.
func saveHash(out []byte) [32]byte {
	h := sha256.New()
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("#")) {
			continue
		}
		if bytes.HasPrefix(line, []byte(":")) {
			line = counters.ReplaceAll(line, nil)
		}
		h.Write(line)
		h.Write([]byte{'\n'})
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// compareTables adds to dr the owned chains that are missing, extra or
// whose rules differ, and the jumps from built-in chains that are
// missing: what planFull would write.
func compareTables(fam dataplane.Family, rs *Ruleset, kv kernelView, dr *dataplane.Drift) {
	where := xtables.FlavourAuto.Binary(fam)
	for _, t := range rs.Tables() {
		for _, n := range rs.ChainNames(t) {
			got, ok := kv.owned[t][n]
			switch {
			case !ok:
				dr.Add(dataplane.DriftChain, fmt.Sprintf("%s -t %s %s: missing", where, t, n))
			case !xtables.SameRules(got, rs.Chains[t][n].Rules):
				dr.Add(dataplane.DriftRule, fmt.Sprintf("%s -t %s %s: %d rules, want %d or they differ", where, t, n, len(got), len(rs.Chains[t][n].Rules)))
			}
		}
	}
	for _, t := range sorted.Keys(kv.owned) {
		for _, n := range sorted.Keys(kv.owned[t]) {
			if _, ok := rs.Chains[t][n]; !ok {
				dr.Add(dataplane.DriftChain, fmt.Sprintf("%s -t %s %s: not in the ruleset", where, t, n))
			}
		}
	}
	for _, j := range rs.Jumps {
		if !kv.jumps[j.Table+"/"+j.Chain+"/"+j.Target] {
			dr.Add(dataplane.DriftRule, fmt.Sprintf("%s -t %s %s: jump to %s missing", where, j.Table, j.Chain, j.Target))
		}
	}
}

// compareHairpin adds to dr a missing hairpin set or its members that
// differ from the applied ones.
func compareHairpin(rs *Ruleset, ks *ipset.Set, dr *dataplane.Drift) {
	if ks == nil {
		dr.Add(dataplane.DriftSet, "ipset "+rs.HairpinSet+": missing")
		return
	}
	have := canonMembers(ks.Members)
	for _, m := range rs.HairpinMembers() {
		if _, ok := have[m]; !ok {
			dr.Add(dataplane.DriftElement, "ipset "+rs.HairpinSet+": missing "+m)
		}
	}
	for _, m := range sorted.Keys(have) {
		if _, ok := rs.hairpin[m]; !ok {
			dr.Add(dataplane.DriftElement, "ipset "+rs.HairpinSet+": not ours "+m)
		}
	}
}

// committedBlocks counts the table blocks of restore input that change
// something: each is one nf_tables transaction on iptables-nft.
func committedBlocks(payload string) int {
	n, lines := 0, 0
	for line := range strings.Lines(payload) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case len(line) > 0 && line[0] == '*':
			lines = 0
		case line == "COMMIT":
			if lines > 0 {
				n++
			}
		case line != "" && line[0] != '#':
			lines++
		}
	}
	return n
}
