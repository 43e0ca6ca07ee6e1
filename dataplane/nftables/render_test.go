package nftables

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.nft")

// goldenCase applies a state once to knftables Fakes and returns, per
// family, the Fake's dump (valid "nft -f" input) followed by the skips.
func goldenCase(t *testing.T, st *dataplane.State) string {
	fams := dataplanetest.Families(st)
	b := newFakeBed(t, fams...)
	b.apply(t, st, false)
	var out strings.Builder
	for _, f := range fams {
		fmt.Fprintf(&out, "# family %s\n%s", nftFamily(f), b.fakes[f].Dump())
		rs, err := Render(st, f)
		if err != nil {
			t.Fatal(err)
		}
		dataplanetest.WriteSkips(&out, rs.Skips)
	}
	return out.String()
}

func TestGolden(t *testing.T) {
	dataplanetest.RunGolden(t, "testdata", "want.nft", *update, goldenCase)
}

func TestValidateFindsDanglingReferences(t *testing.T) {
	rs := newRuleset(dataplane.IPv4)
	rs.addText("a", "goto svc-MISSING")
	rs.addText("b", "ip saddr @nope drop")
	rs.set(&Set{Name: mapServiceIPs, Map: true, Type: "ipv4_addr : verdict"})
	rs.element(mapServiceIPs, "goto ext-GONE", "10.0.0.1")
	err := rs.Validate()
	if err == nil {
		t.Fatal("Validate accepted dangling references")
	}
	for _, want := range []string{"svc-MISSING", "@nope", "ext-GONE"} {
		if !strings.Contains(err.Error(), strings.TrimPrefix(want, "@")) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestNamesStableAndDistinct(t *testing.T) {
	a := namesFor("ns", "web", "http", dataplane.TCP)
	if a != namesFor("ns", "web", "http", dataplane.TCP) {
		t.Error("names not stable")
	}
	if a.svc == namesFor("ns", "web", "http", dataplane.UDP).svc {
		t.Error("protocol not part of the identity")
	}
	for _, n := range []string{a.svc, a.local, a.ext, a.fw} {
		if !isServiceObject(n) || isServiceObject(chainServices) {
			t.Errorf("%s: ownership test wrong", n)
		}
	}
	ep := a.endpointChain(netipMust("[fd00::2]:80"))
	if strings.Contains(ep, ":") {
		t.Errorf("endpoint chain %q contains a colon", ep)
	}
	if a.affinitySet(netipMust("10.0.0.1:80"), 10) == a.affinitySet(netipMust("10.0.0.1:80"), 20) {
		t.Error("affinity timeout not part of the set identity")
	}
}
