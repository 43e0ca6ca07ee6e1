package iptables

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestNFTTableRewriteKeepsForeignRules forces the whole-table rewrite
// (restore without --noflush) on a small state and checks on the real
// kernel that foreign chains and rules in nat and filter come out
// byte-identical, in order, that traffic flows, and that Cleanup restores
// the tables exactly.
func TestNFTTableRewriteKeepsForeignRules(t *testing.T) {
	b := newBed(t)
	foreign := "*nat\n:FOREIGN - [0:0]\n-A FOREIGN -p tcp -m tcp --dport 9 -m comment --comment \"keep me\" -j RETURN\n" +
		"-A PREROUTING -j FOREIGN\n-A POSTROUTING -s 172.31.0.0/16 -j MASQUERADE\nCOMMIT\n" +
		"*filter\n:FOREIGN-FW - [0:0]\n-A FOREIGN-FW -p udp -m udp --dport 9 -j DROP\n-A INPUT -j FOREIGN-FW\n" +
		"-A FORWARD -s 192.0.2.0/24 -j DROP\nCOMMIT\n"
	if _, err := b.Topo.ExecInput(t.Context(), b.Node.NS, strings.NewReader(foreign), "iptables-nft-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	before := b.nftSave(t)
	dp := b.newDP(t, iptables.Config{Flavour: xtables.FlavourNFT, RewriteTablesAbove: 1})
	st := dptest.State(b.Node, dptest.Service("web", vip.Addr().String(), 80, 30080, b.Pods...))
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := dp.LastSync(); s.TableRewrites != 1 || s.Restores != 1 {
		t.Fatalf("stats %+v, want one whole-table rewrite", s)
	}
	after := b.nftSave(t)
	var kept []string
	for _, l := range strings.Split(after, "\n") {
		if !strings.Contains(l, "KUBE-") {
			kept = append(kept, l)
		}
	}
	if got := strings.Join(kept, "\n"); got != before {
		t.Errorf("foreign rules changed:\nbefore:\n%s\nafter (ours removed):\n%s", before, got)
	}
	b.CheckAnswered(t, b.Node.NS, vip, 10, "traffic after rewrite")
	if err := dp.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := b.nftSave(t); got != before {
		t.Errorf("after Cleanup:\n%s\nwant:\n%s", got, before)
	}
}

// nftSave returns nat and filter from iptables-nft-save without comments
// and policy counters (traffic moves those).
func (b *bed) nftSave(t *testing.T) string {
	t.Helper()
	var lines []string
	for _, table := range []string{"nat", "filter"} {
		out, err := b.Topo.Exec(t.Context(), b.Node.NS, "iptables-nft-save", "-t", table)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			if strings.HasPrefix(l, ":") {
				l, _, _ = strings.Cut(l, " [")
			}
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
