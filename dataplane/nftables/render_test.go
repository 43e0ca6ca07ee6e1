package nftables

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*/want.nft")

func hasIPv6(st *dataplane.State) bool {
	for _, sv := range st.Services {
		for _, ip := range sv.GetClusterIps() {
			if strings.Contains(ip, ":") {
				return true
			}
		}
	}
	return false
}

// goldenCase applies a case once to knftables Fakes and returns, per
// family, the Fake's dump (valid "nft -f" input) followed by the skips.
func goldenCase(t *testing.T, name string) string {
	st := dataplanetest.LoadState(t, name)
	fams := []dataplane.Family{dataplane.IPv4}
	if hasIPv6(st) {
		fams = append(fams, dataplane.IPv6)
	}
	b := newFakeBed(t, fams...)
	b.apply(t, st, false)
	var out strings.Builder
	for _, f := range fams {
		fmt.Fprintf(&out, "# family %s\n%s", nftFamily(f), b.fakes[f].Dump())
		rs, err := Render(st, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range rs.Skips {
			fmt.Fprintf(&out, "# skip %q: %s\n", s.Service, s.Reason)
		}
	}
	return out.String()
}

func TestGolden(t *testing.T) {
	for _, name := range dataplanetest.Cases(t, "testdata/*/want.nft") {
		t.Run(name, func(t *testing.T) {
			got := goldenCase(t, name)
			if again := goldenCase(t, name); again != got {
				t.Fatal("rendering is not deterministic")
			}
			dataplanetest.Golden(t, filepath.Join("testdata", name, "want.nft"), got, *update)
		})
	}
}

func TestValidateFindsDanglingReferences(t *testing.T) {
	rs := newRuleset(dataplane.IPv4)
	rs.add("a", "goto svc-MISSING")
	rs.add("b", "ip saddr @nope drop")
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
