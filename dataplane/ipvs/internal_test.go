package ipvs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestCanonRuleMatchesSaveSpelling(t *testing.T) {
	tests := []struct {
		name        string
		a, b        string
		wantSameish bool
	}{
		{"reordered matches", "-m set --match-set A dst,dst -p tcp -j X", "-p tcp -m set --match-set A dst,dst -j X", true},
		{"quotes", `-m comment --comment "a b" -j X`, `-m comment --comment a b -j X`, true},
		{"negation kept", "-m set ! --match-set A src -j X", "-m set --match-set A src -j X", false},
		{"different set", "-m set --match-set A dst -j X", "-m set --match-set B dst -j X", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := xtables.CanonRule(tc.a) == xtables.CanonRule(tc.b); got != tc.wantSameish {
				t.Errorf("same = %v, want %v\n%q\n%q", got, tc.wantSameish, xtables.CanonRule(tc.a), xtables.CanonRule(tc.b))
			}
		})
	}
}

// TestPlanSets: missing sets are created, members added before and
// deleted after, and a set of ours of another type is refused.
func TestPlanSets(t *testing.T) {
	set := func(name, typ string, members ...string) *ipset.Set {
		s := &ipset.Set{Spec: ipset.Spec{Name: name, Type: typ}, Members: map[string]bool{}}
		for _, m := range members {
			s.Members[m] = true
		}
		return s
	}
	have := map[string]*ipset.Set{
		"SWYD-IPVS-B": set("SWYD-IPVS-B", "bitmap:port", "80", "81"),
		"SWYD-IPVS-Z": set("SWYD-IPVS-Z", "bitmap:port", "1"), // not wanted: left alone
	}
	want := map[string]*ipset.Set{
		"SWYD-IPVS-A": set("SWYD-IPVS-A", "bitmap:port", "1"),
		"SWYD-IPVS-B": set("SWYD-IPVS-B", "bitmap:port", "81", "82"),
	}
	pre, post, err := planSets(have, want)
	if err != nil {
		t.Fatal(err)
	}
	if wantPre := "create SWYD-IPVS-A bitmap:port range 0-65535\nadd SWYD-IPVS-A 1\nadd SWYD-IPVS-B 82\n"; pre != wantPre {
		t.Errorf("pre:\n%s\nwant:\n%s", pre, wantPre)
	}
	if wantPost := "del SWYD-IPVS-B 80\n"; post != wantPost {
		t.Errorf("post:\n%s\nwant:\n%s", post, wantPost)
	}
	if _, _, err := planSets(map[string]*ipset.Set{"SWYD-IPVS-X": set("SWYD-IPVS-X", "hash:ip")},
		map[string]*ipset.Set{"SWYD-IPVS-X": set("SWYD-IPVS-X", "hash:net")}); err == nil {
		t.Error("a set of another type was accepted")
	}
}

// TestNamesFit: ipset names are at most 31 characters, chains 28.
func TestNamesFit(t *testing.T) {
	for base := range setTypes {
		for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
			if n := setName(fam, base); len(n) > 31 {
				t.Errorf("set %s: %d characters", n, len(n))
			}
		}
	}
	for _, c := range []string{chainServices, chainNodePort, chainMarkMasq, chainPostrouting, chainInput, chainForward} {
		if len(c) > 28 || !isOwnedChain(c) || strings.HasPrefix(c, "KUBE-") {
			t.Errorf("chain %s", c)
		}
	}
}

// TestRulesIndependentOfServices: the rules are the same with no service
// and with several, so a service change never rewrites them.
func TestRulesIndependentOfServices(t *testing.T) {
	cfg := &switchyardv1.NodeConfig{ClusterCidrs: []string{"10.244.0.0/16"}, NodeIps: []string{"10.200.0.1"}}
	empty := &dataplane.State{Config: cfg}
	full := &dataplane.State{Config: cfg, Services: map[string]*switchyardv1.ServiceView{}}
	for i, proto := range []switchyardv1.Protocol{switchyardv1.Protocol_PROTOCOL_TCP, switchyardv1.Protocol_PROTOCOL_UDP} {
		name := fmt.Sprintf("s%d", i)
		full.Services["ns/"+name] = &switchyardv1.ServiceView{
			Namespace: "ns", Name: name, ClusterIps: []string{fmt.Sprintf("10.96.0.%d", i+1)},
			ExternalIps: []string{"192.0.2.1"}, LoadBalancerIps: []string{"198.51.100.1"},
			LoadBalancerSourceRanges: []string{"203.0.113.0/24"},
			Ports:                    []*switchyardv1.ServicePort{{Name: "p", Protocol: proto, Port: 80, NodePort: uint32(30000 + i)}},
		}
	}
	o := renderOptions{families: []dataplane.Family{dataplane.IPv4, dataplane.IPv6}, scheduler: "rr"}
	a, b := render(empty, o), render(full, o)
	if d := cmp.Diff(a.rules, b.rules, cmp.AllowUnexported(ruleset{})); d != "" {
		t.Errorf("rules depend on services:\n%s", d)
	}
	if len(b.vs) != 8 {
		t.Errorf("%d virtual servers, want 8 (3 addresses + 1 node IP, 2 services)", len(b.vs))
	}
	if rulesPayload(a.rules[dataplane.IPv4], cloneRuleset(a.rules[dataplane.IPv4])) != "" {
		t.Error("equal rulesets give a payload")
	}
}
