package iptables

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// kubeProxyShape programs kube-proxy's iptables structure, for
// BenchmarkSync to compare Switchyard's with (BENCHMARKS.md §2): one flat
// nat KUBE-SERVICES with a rule per service address, a KUBE-SVC chain per
// service port balancing over a KUBE-SEP chain per endpoint, each with
// its own hairpin rule (-s endpoint -j KUBE-MARK-MASQ) and its DNAT, and
// no ipset. As kube-proxy does, every sync rewrites the top-level nat
// chains and the whole filter table, plus the chains of the services that
// changed; a full sync reads the tables back and rewrites every chain. It
// reads services through dataplane/serviceport, as the modes do, and
// writes IPv4 only (the benchmark's family). Benchmark code, not a mode:
// no hairpin set, no conntrack cleanup, no skips reported; its tests
// (kubeproxyshape_verify_test.go) check the structure and that it
// forwards. The production package renders only Switchyard's shape.
type kubeProxyShape struct {
	run     command.Runner
	flavour xtables.Flavour
	config  *switchyardv1.NodeConfig
	svcs    map[string]*kpService // as last applied, by service name
	stats   dataplane.SyncStats
}

// kpService is one service as kube-proxy's shape renders it: its own
// chains and its rules in the shared ones (kpSharedChains).
type kpService struct {
	view   *switchyardv1.ServiceView
	own    map[string][]string // nat chain → rules
	shared map[kpChain][]string
}

type kpChain struct{ table, name string }

// kpSharedChains are the chains every sync rewrites whole, with the
// rules each holds whatever the services are.
var kpSharedChains = []struct {
	kpChain
	fixed []string
}{
	{kpChain{"nat", "KUBE-MARK-MASQ"}, []string{"-j MARK --set-xmark 0x4000/0x4000"}},
	{kpChain{"nat", "KUBE-POSTROUTING"}, []string{
		"-m mark ! --mark 0x4000/0x4000 -j RETURN",
		"-j MARK --set-xmark 0x4000/0x0",
		`-m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
	}},
	{kpChain{"nat", "KUBE-NODEPORTS"}, nil},
	{kpChain{"nat", "KUBE-SERVICES"}, nil}, // + the jump to KUBE-NODEPORTS, last
	{kpChain{"filter", "KUBE-SERVICES"}, nil},
	{kpChain{"filter", "KUBE-EXTERNAL-SERVICES"}, nil},
	{kpChain{"filter", "KUBE-PROXY-FIREWALL"}, nil},
	{kpChain{"filter", "KUBE-NODEPORTS"}, nil},
	{kpChain{"filter", "KUBE-FORWARD"}, []string{
		"-m conntrack --ctstate INVALID -j DROP",
		`-m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT`,
		`-m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
	}},
}

const kpNodePortsLast = `-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`

// kpJumps are the rules in built-in chains: table, chain, rule.
var kpJumps = [][3]string{
	{"nat", "PREROUTING", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"nat", "OUTPUT", `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"nat", "POSTROUTING", `-m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`},
	{"filter", "INPUT", `-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`},
	{"filter", "INPUT", `-m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`},
	{"filter", "INPUT", `-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`},
	{"filter", "FORWARD", `-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`},
	{"filter", "FORWARD", `-m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`},
	{"filter", "FORWARD", `-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"filter", "FORWARD", `-m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`},
	{"filter", "OUTPUT", `-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`},
	{"filter", "OUTPUT", `-m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
}

func newKubeProxyShape(r command.Runner, fl xtables.Flavour) *kubeProxyShape {
	return &kubeProxyShape{run: r, flavour: fl}
}

// LastSync is the last Apply's chains written and restores run.
func (k *kubeProxyShape) LastSync() dataplane.SyncStats { return k.stats }

// Apply renders the services that changed (all of them when the node's
// settings did) and writes one sync; the first Apply and one with
// opts.Full are full syncs.
func (k *kubeProxyShape) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	k.stats = dataplane.SyncStats{}
	full := opts.Full || k.svcs == nil
	next := k.render(st, full || !proto.Equal(k.config, st.Config))
	write := sharedChains(next)
	var remove []kpChain
	var jumps [][3]string
	if full {
		saved, err := k.readBack(ctx)
		if err != nil {
			return err
		}
		remove, jumps = planKubeProxyFull(saved, next, write)
	} else {
		remove = k.planPartial(next, write)
	}
	slices.SortFunc(remove, func(a, b kpChain) int { return strings.Compare(a.table+" "+a.name, b.table+" "+b.name) })
	if err := k.restore(ctx, write, remove, jumps); err != nil {
		k.svcs = nil // the next sync is full
		return err
	}
	k.svcs, k.config = next, st.Config
	return nil
}

// render returns st's services rendered, reusing the last Apply's for
// the unchanged ones unless all.
func (k *kubeProxyShape) render(st *dataplane.State, all bool) map[string]*kpService {
	node := serviceport.ReadNode(st.Config, dataplane.IPv4, serviceport.NodePortsAll, func(string, string) {})
	next := make(map[string]*kpService, len(st.Services))
	for name, sv := range st.Services {
		if old := k.svcs[name]; old != nil && !all && serviceport.Unchanged(old.view, sv) {
			next[name] = old
			continue
		}
		next[name] = renderKubeProxy(name, sv, node)
	}
	return next
}

// sharedChains assembles the chains every sync rewrites from the
// services' rules, in service name order.
func sharedChains(svcs map[string]*kpService) map[kpChain][]string {
	write := map[kpChain][]string{}
	for _, name := range slices.Sorted(maps.Keys(svcs)) {
		for c, rules := range svcs[name].shared {
			write[c] = append(write[c], rules...)
		}
	}
	for _, c := range kpSharedChains {
		write[c.kpChain] = append(slices.Clone(c.fixed), write[c.kpChain]...)
	}
	natServices := kpChain{"nat", "KUBE-SERVICES"}
	write[natServices] = append(write[natServices], kpNodePortsLast)
	return write
}

// planKubeProxyFull adds every service chain to write and returns the
// owned chains the read-back holds that write lacks and the missing
// jumps from built-in chains.
func planKubeProxyFull(saved map[string]*xtables.SavedTable, svcs map[string]*kpService, write map[kpChain][]string) (remove []kpChain, jumps [][3]string) {
	for _, s := range svcs {
		for n, rules := range s.own {
			write[kpChain{"nat", n}] = rules
		}
	}
	for t, tbl := range saved {
		for _, n := range tbl.Chains() {
			if _, ok := write[kpChain{t, n}]; !ok && iptables.IsOwnedChain(n) {
				remove = append(remove, kpChain{t, n})
			}
		}
	}
	for _, j := range kpJumps {
		tbl := saved[j[0]]
		if tbl == nil || !slices.ContainsFunc(tbl.Rules(j[1]), func(r string) bool {
			return xtables.RuleTarget(r) == xtables.RuleTarget(j[2])
		}) {
			jumps = append(jumps, j)
		}
	}
	return remove, jumps
}

// planPartial adds the service chains that differ from the last Apply's
// to write and returns the chains of the last Apply next no longer has.
func (k *kubeProxyShape) planPartial(next map[string]*kpService, write map[kpChain][]string) (remove []kpChain) {
	for name, s := range next {
		old := k.svcs[name]
		for n, rules := range s.own {
			if old == nil || !slices.Equal(old.own[n], rules) {
				write[kpChain{"nat", n}] = rules
			}
		}
	}
	for name, old := range k.svcs {
		for n := range old.own {
			if s := next[name]; s == nil {
				remove = append(remove, kpChain{"nat", n})
			} else if _, ok := s.own[n]; !ok {
				remove = append(remove, kpChain{"nat", n})
			}
		}
	}
	return remove
}

func (k *kubeProxyShape) readBack(ctx context.Context) (map[string]*xtables.SavedTable, error) {
	out, err := k.run.Run(ctx, []string{k.flavour.SaveCmd(dataplane.IPv4)}, nil)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy shape: read back: %w", err)
	}
	saved, _ := xtables.ParseSave(out)
	return saved, nil
}

// restore writes the chains with iptables-restore --noflush, leaves
// first; on nft in restores of at most 5000 chains, as the production
// mode batches (one restore on legacy). Deletions and jumps go last.
func (k *kubeProxyShape) restore(ctx context.Context, write map[kpChain][]string, remove []kpChain, jumps [][3]string) error {
	chains := slices.SortedFunc(maps.Keys(write), func(a, b kpChain) int {
		if d := kpLevel(a.name) - kpLevel(b.name); d != 0 {
			return d
		}
		return strings.Compare(a.table+" "+a.name, b.table+" "+b.name)
	})
	limit := max(len(chains), 1)
	if k.flavour == xtables.FlavourNFT {
		limit = 5000
	}
	for start := 0; ; start += limit {
		end := min(start+limit, len(chains))
		last := end == len(chains)
		var b strings.Builder
		for _, t := range []string{"filter", "nat"} {
			var decl, body strings.Builder
			for _, c := range chains[start:end] {
				if c.table == t {
					fmt.Fprintf(&decl, ":%s - [0:0]\n", c.name)
					for _, r := range write[c] {
						fmt.Fprintf(&body, "-A %s %s\n", c.name, r)
					}
				}
			}
			if last {
				for _, c := range remove {
					if c.table == t {
						fmt.Fprintf(&decl, ":%s - [0:0]\n", c.name)
						fmt.Fprintf(&body, "-X %s\n", c.name)
					}
				}
				// In reverse, so they end up in the listed order.
				for _, j := range slices.Backward(jumps) {
					if j[0] == t {
						fmt.Fprintf(&body, "-I %s 1 %s\n", j[1], j[2])
					}
				}
			}
			if decl.Len()+body.Len() > 0 {
				fmt.Fprintf(&b, "*%s\n%s%sCOMMIT\n", t, decl.String(), body.String())
			}
		}
		argv := []string{k.flavour.RestoreCmd(dataplane.IPv4), "-w", "--noflush"}
		if _, err := k.run.Run(ctx, argv, []byte(b.String())); err != nil {
			return fmt.Errorf("kube-proxy shape: restore: %w", err)
		}
		k.stats.Restores++
		k.stats.ChainsWritten += end - start
		if last {
			k.stats.ChainsRemoved = len(remove)
			return nil
		}
	}
}

// kpLevel orders chains leaves first: every chain only jumps to chains
// of a lower level, so each batch of a full sync jumps to chains that
// exist.
func kpLevel(name string) int {
	switch {
	case name == "KUBE-MARK-MASQ" || strings.HasPrefix(name, "KUBE-SEP-"):
		return 0
	case strings.HasPrefix(name, "KUBE-SVC-") || strings.HasPrefix(name, "KUBE-SVL-"):
		return 1
	case strings.HasPrefix(name, "KUBE-EXT-"):
		return 2
	case strings.HasPrefix(name, "KUBE-FW-") || name == "KUBE-NODEPORTS":
		return 3
	}
	return 4
}
