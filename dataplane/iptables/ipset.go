package iptables

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// The hairpin set is driven as kube-proxy's IPVS mode drives its sets:
// `ipset save NAME` to read it back on a full sync, `ipset restore -exist`
// to change it (one process per sync, however many members). Members of
// new endpoints are added before the iptables restore that DNATs to them
// and members of gone endpoints deleted after the one that stops, so no
// intermediate state DNATs an endpoint to itself without masquerade.

// hairpinMaxElem bounds the set. A hash set allocates per member, not
// per maxelem, so this costs nothing until used; ipset's default (65536)
// would cap a node at 65,536 distinct endpoint ports.
const hairpinMaxElem = 1 << 20

// createSetLine is the ipset restore line that creates a hairpin set.
func createSetLine(name string, fam Family) string {
	return fmt.Sprintf("create %s %s family %s hashsize 1024 maxelem %d", name, hairpinType, fam.ipsetFamily(), hairpinMaxElem)
}

// kernelSet is one set as `ipset save` prints it.
type kernelSet struct {
	typ, family string
	members     map[string]struct{}
}

// setPlan is what one sync does to a hairpin set.
type setPlan struct {
	pre     string // ipset restore input run before the iptables restores
	post    string // and after them
	added   int
	removed int
}

// planHairpin plans the hairpin set of rs. A full sync compares with the
// set read back from the kernel (creating it when missing, repairing any
// drift); a partial sync with the members last applied.
func (d *Dataplane) planHairpin(ctx context.Context, fam Family, rs *Ruleset, full bool) (setPlan, error) {
	if rs.HairpinSet == "" {
		return setPlan{}, nil
	}
	have, create := d.hairpin[fam], false
	if full || have == nil {
		ks, err := d.readSet(ctx, rs.HairpinSet)
		if err != nil {
			return setPlan{}, err
		}
		switch {
		case ks == nil:
			create, have = true, nil
		case ks.typ != hairpinType || ks.family != fam.ipsetFamily():
			// Neither swap nor create changes the type of a set that
			// rules still reference; Cleanup removes both.
			return setPlan{}, fmt.Errorf("ipset %s is %s family %s, want %s family %s: run the mode's cleanup",
				rs.HairpinSet, ks.typ, ks.family, hairpinType, fam.ipsetFamily())
		default:
			have = ks.members
		}
	}
	return diffSet(rs.HairpinSet, fam, have, rs.hairpin, create), nil
}

// diffSet returns the restore inputs that turn have into want.
func diffSet(name string, fam Family, have, want map[string]struct{}, create bool) setPlan {
	var p setPlan
	var pre, post strings.Builder
	if create {
		pre.WriteString(createSetLine(name, fam) + "\n")
	}
	// Only the differences are sorted: a partial sync at 25,000 members
	// must not sort them all.
	adds, dels := missing(want, have), missing(have, want)
	for _, m := range adds {
		fmt.Fprintf(&pre, "add %s %s\n", name, m)
	}
	for _, m := range dels {
		fmt.Fprintf(&post, "del %s %s\n", name, m)
	}
	p.pre, p.post, p.added, p.removed = pre.String(), post.String(), len(adds), len(dels)
	return p
}

// missing returns the keys of a that b lacks, sorted.
func missing(a, b map[string]struct{}) []string {
	var out []string
	for m := range a {
		if _, ok := b[m]; !ok {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// readSet reads one of our sets back; nil when it does not exist.
func (d *Dataplane) readSet(ctx context.Context, name string) (*kernelSet, error) {
	out, err := d.cfg.Runner.Run(ctx, []string{"ipset", "save", name}, nil)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil, nil
		}
		return nil, fmt.Errorf("read back ipset %s: %w", name, err)
	}
	return parseSet(out, name), nil
}

// parseSet parses `ipset save NAME` output. Members are respelled as
// rendered (hairpinMember), so an equal set compares equal however ipset
// prints addresses.
func parseSet(out []byte, name string) *kernelSet {
	ks := &kernelSet{members: map[string]struct{}{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[1] != name {
			continue
		}
		switch f[0] {
		case "create":
			ks.typ = f[2]
			for i := 3; i+1 < len(f); i++ {
				if f[i] == "family" {
					ks.family = f[i+1]
				}
			}
		case "add":
			ks.members[canonMember(f[2])] = struct{}{}
		}
	}
	return ks
}

// canonMember respells "ip,proto:port,ip"; anything else is kept as is
// (it is not wanted, so it gets deleted in the spelling ipset printed).
func canonMember(m string) string {
	parts := strings.Split(m, ",")
	if len(parts) != 3 {
		return m
	}
	a, err1 := netip.ParseAddr(parts[0])
	b, err2 := netip.ParseAddr(parts[2])
	proto, port, ok := strings.Cut(parts[1], ":")
	n, err3 := strconv.ParseUint(port, 10, 16)
	if err1 != nil || err2 != nil || err3 != nil || !ok {
		return m
	}
	return fmt.Sprintf("%s,%s:%d,%s", a, proto, n, b)
}

func (d *Dataplane) ipsetRestore(ctx context.Context, payload string) error {
	if payload == "" {
		return nil
	}
	if _, err := d.cfg.Runner.Run(ctx, []string{"ipset", "restore", "-exist"}, []byte(payload)); err != nil {
		return fmt.Errorf("ipset restore: %w", err)
	}
	d.stats.IPSetRestores++
	return nil
}

// destroySets destroys the hairpin sets of fams that exist. It runs after
// the rules referring to them are gone (the kernel refuses to destroy a
// set in use); sets of other software are never named.
func (d *Dataplane) destroySets(ctx context.Context, fams []Family) error {
	out, err := d.cfg.Runner.Run(ctx, []string{"ipset", "list", "-n"}, nil)
	if err != nil {
		if IsNotFound(err) {
			return nil // no ipset binary: no set of ours either
		}
		return fmt.Errorf("list ipsets: %w", err)
	}
	present := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		present[strings.TrimSpace(l)] = true
	}
	var names []string
	for _, f := range fams {
		if n := f.hairpinSet(); present[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "destroy %s\n", n)
	}
	if b.Len() == 0 {
		return nil
	}
	if _, err := d.cfg.Runner.Run(ctx, []string{"ipset", "restore"}, []byte(b.String())); err != nil {
		return fmt.Errorf("destroy ipsets %v: %w", names, err)
	}
	return nil
}
