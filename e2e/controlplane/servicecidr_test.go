package controlplane_test

import (
	"context"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// nodeConfigUntil reads c's responses until one carries a NodeConfig for
// which ok holds, and returns it.
func (c *deltaClient) nodeConfigUntil(ctx context.Context, what string, ok func(*switchyardv1.NodeConfig) bool) *switchyardv1.NodeConfig {
	c.t.Helper()
	for ctx.Err() == nil {
		for _, r := range c.next().GetResources() {
			if nc := r.GetNodeConfig(); nc != nil && ok(nc) {
				return nc
			}
		}
	}
	c.t.Fatalf("no NodeConfig with %s before the deadline", what)
	return nil
}

// TestServiceCIDRReachesNodeConfig: the API server's own ServiceCIDR
// ("kubernetes", made from --service-cluster-ip-range) and one created
// later reach every agent's NodeConfig as service_cidrs; deleting one
// takes it out again. --nodeport-addresses reaches it too.
func TestServiceCIDRReachesNodeConfig(t *testing.T) {
	ctx, api, _ := withFixture(t)
	cp := startControlPlane(t, api, "--nodeport-addresses", "primary,192.168.0.0/16")
	a := openDelta(ctx, t, dial(t, cp.grpc), "node-a", nil)

	// The default ServiceCIDR is created by the API server shortly after
	// it starts: the first NodeConfig may come before it.
	first := a.nodeConfigUntil(ctx, "the default range", func(nc *switchyardv1.NodeConfig) bool {
		return slices.Equal(nc.GetServiceCidrs(), []string{apiserver.DefaultServiceCIDR})
	})
	if got, want := first.GetNodePortAddresses(), []string{"primary", "192.168.0.0/16"}; !slices.Equal(got, want) {
		t.Errorf("node_port_addresses %v, want %v", got, want)
	}
	if got := first.GetNodeIps(); !slices.Equal(got, []string{"10.200.0.10"}) {
		t.Errorf("node_ips %v, want [10.200.0.10]", got)
	}

	sc := api.Client().NetworkingV1().ServiceCIDRs()
	extra := &networkingv1.ServiceCIDR{
		ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec:       networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/16"}},
	}
	if _, err := sc.Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.nodeConfigUntil(ctx, "both ranges", func(nc *switchyardv1.NodeConfig) bool {
		return slices.Equal(nc.GetServiceCidrs(), []string{apiserver.DefaultServiceCIDR, "10.100.0.0/16"})
	})

	// Deleted: it goes. (No kube-controller-manager runs here to hold it
	// with its finalizer while cluster IPs of it are allocated; until it
	// is gone it would be kept, as kube-proxy keeps it.)
	if err := sc.Delete(ctx, "extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.nodeConfigUntil(ctx, "the extra range gone", func(nc *switchyardv1.NodeConfig) bool {
		return slices.Equal(nc.GetServiceCidrs(), []string{apiserver.DefaultServiceCIDR})
	})
}
