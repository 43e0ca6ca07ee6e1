package watch

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
)

func testServiceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// servingServiceCIDRs makes the fake's discovery list servicecidrs, as a
// 1.33+ API server does.
func servingServiceCIDRs(c *fake.Clientset) {
	c.Resources = append(c.Resources, &metav1.APIResourceList{
		GroupVersion: networkingv1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "servicecidrs", Kind: "ServiceCIDR", Verbs: []string{"list", "watch"}}},
	})
}

// runWatcher runs a watcher on client with views until the test ends
// and waits for it to be ready.
func runWatcher(t *testing.T, client *fake.Clientset, views nodeview.Options) *recorder {
	t.Helper()
	return runWatcherWith(t, Config{Client: client, Views: views})
}

func TestWatcherFollowsServiceCIDRs(t *testing.T) {
	client := fake.NewClientset(testNode("node-a", "z1"), testServiceCIDR("kubernetes", "10.96.0.0/16"))
	servingServiceCIDRs(client)
	rec := runWatcher(t, client, nodeview.Options{})
	cidrs := func() []string { return rec.config(t, "node-a").GetServiceCidrs() }
	if got := cidrs(); !slices.Equal(got, []string{"10.96.0.0/16"}) {
		t.Fatalf("initial service_cidrs %v, want [10.96.0.0/16]", got)
	}

	ctx := t.Context()
	sc := client.NetworkingV1().ServiceCIDRs()
	if _, err := sc.Create(ctx, testServiceCIDR("extra", "fd00:10:96::/112", "10.100.0.0/16"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second range on node-a", func() bool {
		return slices.Equal(cidrs(), []string{"10.96.0.0/16", "10.100.0.0/16", "fd00:10:96::/112"})
	})
	rec.mu.Lock()
	if !slices.Contains(rec.changed["node-a"], "node-a") {
		t.Errorf("node-a published with changed=%v, want its NodeConfig named", rec.changed["node-a"])
	}
	rec.mu.Unlock()
	if err := sc.Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first range gone", func() bool {
		return slices.Equal(cidrs(), []string{"10.100.0.0/16", "fd00:10:96::/112"})
	})
}

// TestWatcherWithoutServiceCIDRs: an API that does not serve them (the
// fake lists no resources) gets no informer, so the watcher is ready
// and NodeConfigs carry no ranges.
func TestWatcherWithoutServiceCIDRs(t *testing.T) {
	client := fake.NewClientset(testNode("node-a", "z1"), testServiceCIDR("kubernetes", "10.96.0.0/16"))
	rec := runWatcher(t, client, nodeview.Options{})
	if got := rec.config(t, "node-a"); got == nil || len(got.GetServiceCidrs()) != 0 {
		t.Fatalf("NodeConfig %v, want one without service_cidrs", got)
	}
}
