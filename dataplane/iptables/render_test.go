package iptables

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.rules")

// renderGolden is a state as the golden text: each family's restore
// input followed by its skips.
func renderGolden(t *testing.T, st *dataplane.State) string {
	var b strings.Builder
	for _, f := range dataplanetest.Families(st) {
		rs, err := Render(st, f, goldenOptions)
		if err != nil {
			t.Fatalf("Render %s: %v", f, err)
		}
		fmt.Fprintf(&b, "# family %s\n%s", f, rs)
		dataplanetest.WriteSkips(&b, rs.Skips)
	}
	return b.String()
}

func TestRenderGolden(t *testing.T) {
	dataplanetest.RunGolden(t, "testdata", "want.rules", *update, renderGolden)
}

func TestValidateFindsDanglingJump(t *testing.T) {
	rs := newRuleset(dataplane.IPv4)
	rs.add(tableNAT, chainServices, "-d 10.0.0.1 -j KUBE-SVC-MISSING")
	rs.add(tableNAT, "KUBE-SEP-X", "-j DNAT --to-destination 10.0.0.2:80")
	rs.Jumps = append(rs.Jumps, Jump{Table: tableFilter, Chain: "INPUT", Rule: "-j KUBE-NOPE", Target: "KUBE-NOPE"})
	err := rs.Validate()
	if err == nil {
		t.Fatal("Validate accepted dangling jumps")
	}
	for _, want := range []string{"KUBE-SVC-MISSING", "KUBE-NOPE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestValidateFindsUnknownSetAndPortlessDNAT(t *testing.T) {
	rs := newRuleset(dataplane.IPv4)
	rs.HairpinSet = hairpinSetV4
	rs.add(tableNAT, chainPostrouting, "-m set --match-set", hairpinSetV4, "src,dst,dst -j RETURN")
	if err := rs.Validate(); err != nil {
		t.Fatalf("own set refused: %v", err)
	}
	rs.add(tableNAT, chainPostrouting, "-m set --match-set OTHER src -j RETURN")
	rs.add(tableNAT, "KUBE-SVC-X", "-j DNAT --to-destination 10.0.0.2:80")
	err := rs.Validate()
	for _, want := range []string{`set "OTHER"`, "DNAT without -p"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error %v does not mention %s", err, want)
		}
	}
}

func TestChainNamesStableAndShort(t *testing.T) {
	id := portHashKey("a-very-long-namespace-name-indeed", "and-a-long-service-name", "https-metrics", dataplane.TCP)
	names := []string{svcChain(id), svlChain(id), extChain(id), fwChain(id), shardChain(255)}
	for _, n := range names {
		if len(n) > maxChainName {
			t.Errorf("%s: %d characters", n, len(n))
		}
		if !IsOwnedChain(n) {
			t.Errorf("%s not recognised as owned", n)
		}
	}
	if svcChain(id) != svcChain(portHashKey("a-very-long-namespace-name-indeed", "and-a-long-service-name", "https-metrics", dataplane.TCP)) {
		t.Error("chain name not stable")
	}
	if svcChain(id) == svcChain(portHashKey("a-very-long-namespace-name-indeed", "and-a-long-service-name", "https-metrics", dataplane.UDP)) {
		t.Error("protocol not part of identity")
	}
	if IsOwnedChain("KUBE-FIREWALL") || IsOwnedChain("DOCKER") {
		t.Error("foreign chain claimed")
	}
}

func TestShardingSpreadsServices(t *testing.T) {
	st := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{}}
	for i := range 1000 {
		st.Services[fmt.Sprintf("ns/s%d", i)] = benchService(i, 1)
	}
	rs, err := Render(st, dataplane.IPv4, RenderOptions{ShardBits: DefaultShardBits})
	if err != nil {
		t.Fatal(err)
	}
	top := len(rs.Chains[tableNAT][chainServices].Rules)
	if top > 1<<DefaultShardBits+1 {
		t.Errorf("KUBE-SERVICES has %d rules, want ≤ %d", top, 1<<DefaultShardBits+1)
	}
	for i := range 1 << DefaultShardBits {
		if n := len(rs.Chains[tableNAT][shardChain(i)].Rules); n > 40 {
			t.Errorf("shard %d has %d rules for 1000 services", i, n)
		}
	}
}
