package iptables

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestHairpinThroughSet has a pod connect to cluster IPs whose only
// endpoint is itself, on both flavours: the packet leaves the bridge port
// it came in on (hairpin_mode=1) and the reply must come back through the
// node, so the hairpin set's rule must masquerade it (the echo server
// sees the bridge address). Without masquerade the pod would answer
// itself directly and the connection would stall. A plain service (no
// KUBE-SEP chain) and a ClientIP-affinity one (KUBE-SEP without its own
// hairpin rule) are both checked, and traffic from another pod must keep
// its source address (the set matches only endpoint-to-itself).
func TestHairpinThroughSet(t *testing.T) {
	for _, fl := range []iptables.Flavour{iptables.FlavourNFT, iptables.FlavourLegacy} {
		t.Run(string(fl), func(t *testing.T) {
			b := newBed(t)
			dp := b.newDP(t, iptables.Config{Flavour: fl})
			self := b.Pods[0]
			plain := dptest.Service("self", "10.96.0.20", 80, 0, self)
			sticky := dptest.Service("self-sticky", "10.96.0.21", 80, 0, self)
			sticky.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
			sticky.SessionAffinityTimeoutSeconds = 60
			if err := dp.Apply(t.Context(), dptest.State(b.Node, plain, sticky), dataplane.ApplyOptions{}); err != nil {
				t.Fatal(err)
			}
			const n = 20
			for _, vip := range []string{"10.96.0.20:80", "10.96.0.21:80"} {
				res, err := probe.New(b.Topo, self.NS).TCP(t.Context(), netip.MustParseAddrPort(vip), probe.Options{Count: n})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(map[string]int{self.Name: n}, res.Counts); diff != "" || len(res.Failures) > 0 {
					t.Errorf("%s from its own endpoint (-want +got):\n%s\n%s", vip, diff, res)
				}
				if diff := cmp.Diff(map[string]int{b.Node.PodGateway.String(): n}, res.Clients); diff != "" {
					t.Errorf("%s: client seen by the endpoint, want the bridge address (-want +got):\n%s", vip, diff)
				}
				other := b.Pods[1]
				res, err = probe.New(b.Topo, other.NS).TCP(t.Context(), netip.MustParseAddrPort(vip), probe.Options{Count: 5})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(map[string]int{other.IP.String(): 5}, res.Clients); diff != "" || len(res.Failures) > 0 {
					t.Errorf("%s from another pod: source must be kept (-want +got):\n%s\n%s", vip, diff, res)
				}
			}
		})
	}
}
