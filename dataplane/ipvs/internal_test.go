package ipvs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
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
			if got := canonRule(tc.a) == canonRule(tc.b); got != tc.wantSameish {
				t.Errorf("same = %v, want %v\n%s\n%s", got, tc.wantSameish, canonRule(tc.a), canonRule(tc.b))
			}
		})
	}
}

func TestParseSetsKeepsOursOnly(t *testing.T) {
	out := `create SWYD-IPVS-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1
add SWYD-IPVS-CLUSTER-IP 10.96.0.1,tcp:80
create SWYD-IPVS-NODE-PORT-TCP bitmap:port range 0-65535
add SWYD-IPVS-NODE-PORT-TCP 30080
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.2,tcp:80
`
	got := parseSets([]byte(out))
	want := map[string]*ipset{
		"SWYD-IPVS-CLUSTER-IP":    {name: "SWYD-IPVS-CLUSTER-IP", typ: "hash:ip,port", family: "inet", members: map[string]bool{"10.96.0.1,tcp:80": true}},
		"SWYD-IPVS-NODE-PORT-TCP": {name: "SWYD-IPVS-NODE-PORT-TCP", typ: "bitmap:port", members: map[string]bool{"30080": true}},
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(ipset{})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := setAdditions(map[string]*ipset{"SWYD-IPVS-X": {name: "SWYD-IPVS-X", typ: "hash:ip"}},
		map[string]*ipset{"SWYD-IPVS-X": {name: "SWYD-IPVS-X", typ: "hash:net"}}); err == nil {
		t.Error("a set of another type was accepted")
	}
}

// TestNamesFit: ipset names are at most 31 characters, chains 28.
func TestNamesFit(t *testing.T) {
	for base := range setTypes {
		for _, fam := range []Family{IPv4, IPv6} {
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
	o := renderOptions{families: []Family{IPv4, IPv6}, scheduler: "rr"}
	a, b := render(empty, o), render(full, o)
	if d := cmp.Diff(a.rules, b.rules, cmp.AllowUnexported(ruleset{})); d != "" {
		t.Errorf("rules depend on services:\n%s", d)
	}
	if len(b.vs) != 8 {
		t.Errorf("%d virtual servers, want 8 (3 addresses + 1 node IP, 2 services)", len(b.vs))
	}
	if rulesPayload(a.rules[IPv4], cloneRuleset(a.rules[IPv4])) != "" {
		t.Error("equal rulesets give a payload")
	}
}
