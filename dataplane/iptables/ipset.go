package iptables

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
)

// The hairpin set is driven as kube-proxy's IPVS mode drives its sets
// (package ipset, shared with the ipvs mode): `ipset save NAME` to read
// it back on a full sync, `ipset restore -exist` to change it (one
// process per sync, however many members). This file is the policy: one
// set per family, and when it changes relative to the rules. Members of
// new endpoints are added before the iptables restore that DNATs to them
// and members of gone endpoints deleted after the one that stops, so no
// intermediate state DNATs an endpoint to itself without masquerade.

// hairpinMaxElem bounds the set. A hash set allocates per member, not
// per maxelem, so this costs nothing until used; ipset's default (65536)
// would cap a node at 65,536 distinct endpoint ports.
const hairpinMaxElem = 1 << 20

// hairpinSpec is what creates the hairpin set of one family.
func hairpinSpec(name string, fam dataplane.Family) ipset.Spec {
	return ipset.Spec{Name: name, Type: hairpinType, Family: ipset.Family(fam), MaxElem: hairpinMaxElem}
}

// createSetLine is the ipset restore line that creates a hairpin set.
func createSetLine(name string, fam dataplane.Family) string {
	return hairpinSpec(name, fam).CreateLine()
}

// planHairpin plans the hairpin set of rs: Pre is run before the
// iptables restores, Post after them. A full sync compares with the set
// read back from the kernel (creating it when missing, repairing any
// drift); a partial sync with the members last applied.
func (d *Dataplane) planHairpin(ctx context.Context, fam dataplane.Family, rs *Ruleset, full bool) (ipset.Changes, error) {
	spec := hairpinSpec(rs.HairpinSet, fam)
	have, create := d.hairpin[fam], false
	if full || have == nil {
		ks, err := ipset.SaveSet(ctx, d.cfg.Runner, rs.HairpinSet)
		if err != nil {
			return ipset.Changes{}, err
		}
		if ks == nil {
			create, have = true, nil
		} else {
			// Neither swap nor create changes the type of a set that
			// rules still reference; Cleanup removes both.
			if err := spec.Check(ks.Spec); err != nil {
				return ipset.Changes{}, err
			}
			have = canonMembers(ks.Members)
		}
	}
	return ipset.Diff(spec, have, rs.hairpin, create), nil
}

// canonMembers respells members read back as rendered (hairpinMember),
// so an equal set compares equal however ipset prints addresses.
func canonMembers(ms map[string]bool) map[string]struct{} {
	out := make(map[string]struct{}, len(ms))
	for m := range ms {
		out[canonMember(m)] = struct{}{}
	}
	return out
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
	return ipset.Restore(ctx, d.cfg.Runner, payload, &d.stats.IPSetRestores)
}

// destroySets destroys the hairpin sets of fams that exist. It runs after
// the rules referring to them are gone (the kernel refuses to destroy a
// set in use); sets of other software are never named.
func (d *Dataplane) destroySets(ctx context.Context, fams []dataplane.Family) error {
	out, err := d.cfg.Runner.Run(ctx, []string{"ipset", "list", "-n"}, nil)
	if err != nil {
		if command.IsNotFound(err) {
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
		if n := hairpinSet(f); present[n] {
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
