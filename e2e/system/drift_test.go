package system_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// driftCheckInterval is the agents' default --drift-check-interval.
const driftCheckInterval = 5 * time.Second

// driftCase breaks node-0's rules underneath its agent the way a person
// or another program would.
type driftCase struct {
	name string
	// cmds are run in node-0's namespace, in order; %[1]s is the
	// scenario service's chain (KUBE-SVC-… or svc-…).
	cmds [][]string
	// foreign: the change touches nothing of the agent's: no repair, and
	// the change stays.
	foreign bool
	// stillThere checks, for a foreign change, that it was left alone.
	stillThere []string
	// others: Services other than the scenario's are not touched, so a
	// stream to the cluster's own Service must not lose a connection.
	others bool
}

// testDriftRepaired: each break — a foreign rule, one chain deleted, one
// map element deleted (nftables), the nat table (or the whole table)
// flushed — is found by the agent's drift check and repaired within the
// check interval, with the foreign rule left alone and no failed
// connection to the Services the change did not touch.
func testDriftRepaired(t *testing.T, e *env) {
	if e.mode == modeIPVS {
		notApplicable(t, "the ipvs mode has no drift check: dataplane/ipvs implements no dataplane.DriftChecker, "+
			"so nothing repairs a change made underneath the agent until its next full sync")
	}
	s := e.webService(t, "sc-drift", "10.96.1.40", e.pod(0), e.pod(1))
	n0 := e.c.Topo.Node(0)
	want := names(e.pod(0), e.pod(1))
	served := func(ctx context.Context) func() (bool, string) {
		return func() (bool, string) {
			res, err := e.tcp(ctx, n0.NS, s.vip(0), 16)
			return err == nil && answeredBy(res, want...), fmt.Sprint(res, err)
		}
	}
	waitFor(t.Context(), t, "node-0 serves sc-drift", served(t.Context()))
	for _, c := range driftCases(e.mode == modeNFTables, s.vip(0).Addr().String()) {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			chain, err := e.serviceChain(ctx, n0, s)
			if err != nil {
				t.Fatal(err)
			}
			before := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total")
			checks := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_checks_total")
			var st *stream
			if c.others {
				st = e.startStreamAt(ctx, 50, 3*driftCheckInterval)
			}
			for _, argv := range c.cmds {
				for i := range argv {
					argv[i] = strings.ReplaceAll(argv[i], "%[1]s", chain)
				}
				if out, err := e.c.Topo.Exec(ctx, n0.NS, argv...); err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
				}
			}
			broke := time.Now()
			if c.foreign {
				// Two checks after the change, nothing repaired.
				waitFor(ctx, t, "two drift checks", func() (bool, string) {
					n := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_checks_total")
					return n >= checks+2, fmt.Sprint(n)
				})
				if n := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total"); n != before {
					t.Errorf("a foreign change was repaired: repairs %v -> %v", before, n)
				}
				out, err := e.c.Topo.Exec(ctx, n0.NS, c.stillThere...)
				if err != nil || !strings.Contains(string(out), "foreign") {
					t.Errorf("the foreign change is gone: %v\n%s", err, out)
				}
			} else {
				waitFor(ctx, t, "the drift repaired", func() (bool, string) {
					n := e.agentMetric(ctx, t, n0, "switchyard_agent_drift_repairs_total")
					return n > before, fmt.Sprint(n)
				})
				took := time.Since(broke)
				t.Logf("drift case=%s repaired after %v", c.name, took.Round(10*time.Millisecond))
				if took > driftCheckInterval+5*time.Second {
					t.Errorf("repaired after %v, more than the check interval (%v) and a sync", took, driftCheckInterval)
				}
				waitFor(ctx, t, "node-0 serves sc-drift again", served(ctx))
			}
			if st != nil {
				st.check(t, "drift-"+c.name)
			}
		})
	}
}

func driftCases(nft bool, vip string) []driftCase {
	if !nft {
		return []driftCase{
			{name: "foreign-rule", foreign: true, others: true,
				cmds:       [][]string{{"iptables", "-t", "filter", "-A", "INPUT", "-p", "tcp", "--dport", "9", "-m", "comment", "--comment", "foreign", "-j", "ACCEPT"}},
				stillThere: []string{"iptables", "-t", "filter", "-S", "INPUT"}},
			{name: "chain-deleted", others: true, cmds: [][]string{
				{"sh", "-c", `iptables-save -t nat | grep -- "-j %[1]s$" | grep KUBE-SHARD | sed 's/^-A/-D/' | while read -r r; do eval iptables -t nat $r; done`},
				{"iptables", "-t", "nat", "-F", "%[1]s"}, {"iptables", "-t", "nat", "-X", "%[1]s"}}},
			{name: "nat-flushed", cmds: [][]string{{"iptables", "-t", "nat", "-F"}}},
		}
	}
	return []driftCase{
		{name: "foreign-table", foreign: true, others: true, cmds: [][]string{
			{"nft", "add", "table", "ip", "foreign"}, {"nft", "add", "chain", "ip", "foreign", "c"},
			{"nft", "add", "rule", "ip", "foreign", "c", "tcp", "dport", "9", "counter"}},
			stillThere: []string{"nft", "list", "tables"}},
		{name: "element-deleted", others: true, cmds: [][]string{
			{"nft", "delete", "element", "ip", "switchyard", "service-ips", "{", vip + " . tcp . 80", "}"}}},
		{name: "chain-deleted", others: true, cmds: [][]string{
			{"nft", "delete", "element", "ip", "switchyard", "service-ips", "{", vip + " . tcp . 80", "}"},
			{"nft", "flush", "chain", "ip", "switchyard", "%[1]s"}, {"nft", "delete", "chain", "ip", "switchyard", "%[1]s"}}},
		{name: "table-flushed", cmds: [][]string{{"nft", "flush", "table", "ip", "switchyard"}}},
	}
}

// serviceChain is the scenario service's chain on node n, as the kernel
// has it now.
func (e *env) serviceChain(ctx context.Context, n netns.Node, s *svc) (string, error) {
	if e.mode == modeNFTables {
		out, err := e.c.Topo.Exec(ctx, n.NS, "nft", "list", "map", "ip", "switchyard", "service-ips")
		if err != nil {
			return "", fmt.Errorf("nft list map: %w\n%s", err, out)
		}
		return ruleread.NftServiceChain(out, s.vip(0))
	}
	out, err := e.c.Topo.Exec(ctx, n.NS, "iptables-save", "-t", "nat")
	if err != nil {
		return "", fmt.Errorf("iptables-save: %w\n%s", err, out)
	}
	return ruleread.IptablesServiceChain(out, s.vip(0))
}
