package iptables

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// The benchmark's kube-proxy shape must be kube-proxy's structure and
// must forward, or its column measures something else.

// TestKubeProxyShapeRendersRuleForms applies every rule form through
// kubeProxyShape into the iptables fake (which refuses jumps to missing
// chains and deleting a chain still jumped to), then checks the
// structure and what a partial sync and a service's removal write. No
// root needed.
func TestKubeProxyShapeRendersRuleForms(t *testing.T) {
	f := iptablestest.New()
	k := newKubeProxyShape(f, xtables.FlavourNFT)
	var pods []netns.Pod
	for i := range 3 {
		pods = append(pods, netns.Pod{Name: fmt.Sprintf("pod-%d", i), IP: netip.MustParseAddr(fmt.Sprintf("10.244.0.%d", i+2))})
	}
	node := netns.Node{Name: "node-0", IP: netip.MustParseAddr("10.200.0.10")}
	st := dptest.State(node, dptest.RuleForms([]dataplane.Family{dataplane.IPv4}, pods...)...)
	apply := func(st *dataplane.State, full bool) dataplane.SyncStats {
		t.Helper()
		if err := k.Apply(t.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		return k.LastSync()
	}
	first := apply(st, false)
	dump := f.Dump()
	for _, want := range []string{
		// Flat: service addresses straight in KUBE-SERVICES.
		"-A KUBE-SERVICES -m comment --comment \"default/web:http cluster IP\" -p tcp -m tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-",
		// A KUBE-SEP per endpoint: hairpin mark, then DNAT.
		"-s 10.244.0.2 -j KUBE-MARK-MASQ\n",
		"-p tcp -m tcp -j DNAT --to-destination 10.244.0.2:8080\n",
		"-m recent --name KUBE-SEP-", // affinity
		"-j KUBE-EXT-",               // node port, external and load-balancer IPs
		"-j KUBE-FW-",                // source ranges
		"-j REJECT --reject-with tcp-reset\n",
		"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("no %q in:\n%s", want, dump)
		}
	}
	for _, unwanted := range []string{"KUBE-SHARD-", "--match-set"} {
		if strings.Contains(dump, unwanted) {
			t.Errorf("%q in kube-proxy's shape:\n%s", unwanted, dump)
		}
	}
	if again := apply(st, true); again.ChainsWritten != first.ChainsWritten || again.ChainsRemoved != 0 || f.Dump() != dump {
		t.Errorf("full resync of the same state: %+v after %+v, or tables changed", again, first)
	}

	// One endpoint of "web" moves: the 9 top-level chains, its
	// KUBE-SVC, KUBE-EXT (unchanged rules are not rewritten) and the new
	// KUBE-SEP; the old KUBE-SEP goes.
	web := dptest.Service("web", "10.96.0.10", 80, 30080, pods[0], pods[1])
	web.ClusterEndpoints[1].Address = "10.244.0.9"
	moved := dptest.WithService(st, web)
	if s := apply(moved, false); s.ChainsWritten != 9+2 || s.ChainsRemoved != 2 {
		t.Errorf("one endpoint moved: %+v, want 11 chains written (9 top-level, KUBE-SVC, one KUBE-SEP) and 2 removed", s)
	}
	delete(moved.Services, "default/web")
	if s := apply(moved, false); s.ChainsWritten != 9 || s.ChainsRemoved != 4 {
		t.Errorf("service removed: %+v, want the 9 top-level chains written and its 4 chains removed", s)
	}
	if strings.Contains(f.Dump(), "default/web") {
		t.Errorf("removed service left rules:\n%s", f.Dump())
	}
}

// TestKubeProxyShapeForwards runs the family checks the modes share
// through kubeProxyShape on a real kernel (root; fresh namespaces per
// check): it forwards, refuses, pins and hairpins as a mode does.
func TestKubeProxyShapeForwards(t *testing.T) {
	checks := []struct {
		name string
		run  func(b *dptest.Bed, t *testing.T, apply func(*testing.T, *dataplane.State))
	}{
		{"ClusterIPAndNodePort", (*dptest.Bed).CheckClusterIPAndNodePort},
		{"Affinity", (*dptest.Bed).CheckAffinity},
		{"NoEndpointsRefused", (*dptest.Bed).CheckNoEndpointsRefused},
		{"ETPLocal", (*dptest.Bed).CheckETPLocal},
		{"Hairpin", (*dptest.Bed).CheckHairpin},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			b := dptest.NewBed(t, runnerOptions)
			k := newKubeProxyShape(b.Runner, xtables.FlavourNFT)
			c.run(b, t, dptest.ApplyWith(k))
		})
	}
}
