package ipvstest

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
)

// Run implements command.Runner: ipset in the ipsettest.Fake, iptables
// and ip6tables binaries in the iptablestest.Fake (after checking that
// every set a restore matches exists, as the kernel does). Both are
// recorded here, ipset save and *-save as reads.
func (f *Fake) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	desc := strings.Join(argv, " ")
	mutating := !strings.HasSuffix(argv[0], "-save") && !(argv[0] == "ipset" && len(argv) > 1 && argv[1] == "save")
	if argv[0] != "ipset" {
		f.mu.Lock()
		err := f.record(mutating, "%s", desc)
		if err == nil && mutating {
			err = f.checkSetsUsed(string(stdin))
		}
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return f.ipt.Run(ctx, argv, stdin)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(mutating, "%s", desc); err != nil {
		return nil, err
	}
	return f.sets.Run(ctx, argv, stdin)
}

var matchSet = regexp.MustCompile(`--match-set (\S+)`)

// checkSetsUsed refuses restore input whose rules match a set that does
// not exist, as the kernel does. The sets live in f.sets, not in f.ipt.
func (f *Fake) checkSetsUsed(payload string) error {
	for _, m := range matchSet.FindAllStringSubmatch(payload, -1) {
		if !f.sets.Exists(m[1]) {
			return fmt.Errorf("iptables-restore: Set %s doesn't exist", m[1])
		}
	}
	return nil
}

// setInUse is the ipset fake's InUse hook: a set is in use while an
// iptables rule matches it.
func (f *Fake) setInUse(name string) bool {
	return strings.Contains(f.ipt.Dump(), "--match-set "+name+" ")
}

// SetMembers returns the members of a set, sorted; nil when it does not
// exist.
func (f *Fake) SetMembers(name string) []string { return f.sets.SetMembers(name) }

// AddForeignSet creates a set as other software would.
func (f *Fake) AddForeignSet(name, typ, family string, members ...string) {
	f.sets.AddSet(name, typ, family, members...)
}

// Dump prints the whole state, stably sorted: links and addresses,
// virtual servers with their real servers, ipsets with their members,
// then the iptables tables of each family. Empty sets print on one line.
func (f *Fake) Dump() string {
	f.mu.Lock()
	var b strings.Builder
	for _, n := range sorted.Keys(f.links) {
		l := f.links[n]
		state := "down"
		if l.up {
			state = "up"
		}
		fmt.Fprintf(&b, "link %s %s %s\n", n, l.typ, state)
		for _, a := range sorted.KeysFunc(l.addrs, netip.Addr.Compare) {
			fmt.Fprintf(&b, "  addr %s\n", a)
		}
	}
	for _, k := range sorted.KeysFunc(f.vs, ipvs.VSKey.Compare) {
		v := f.vs[k]
		fmt.Fprintf(&b, "vs %s\n", vsDesc(v.vs))
		for _, a := range sorted.KeysFunc(v.rs, netip.AddrPort.Compare) {
			rs := v.rs[a]
			fmt.Fprintf(&b, "  -> %s masq weight %d", a, rs.Weight)
			if rs.ActiveConns+rs.InactiveConns > 0 {
				fmt.Fprintf(&b, " conns %d/%d", rs.ActiveConns, rs.InactiveConns)
			}
			b.WriteString("\n")
		}
	}
	for _, s := range f.sets.Sets() {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(fmt.Sprintf("ipset %s %s %s", s.Name, s.Type, s.Family)))
		for _, m := range s.Members {
			fmt.Fprintf(&b, "  %s\n", m)
		}
	}
	f.mu.Unlock()
	b.WriteString(f.ipt.Dump())
	return b.String()
}
