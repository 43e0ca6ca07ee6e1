package watch

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// config returns the NodeConfig node has, or nil.
func (r *recorder) config(t *testing.T, node string) *switchyardv1.NodeConfig {
	t.Helper()
	return r.resource(t, node, node).GetNodeConfig()
}

// cpSlice is an EndpointSlice of the control plane's own Service, as the
// EndpointSlice controller writes it for a hostNetwork Deployment: node
// addresses, the port named grpc.
func cpSlice(family discoveryv1.AddressType, name string, ready map[string]bool) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "switchyard-system", Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: "switchyard-controlplane"}},
		AddressType: family,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("grpc"), Port: ptr.To[int32](18000), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	for addr, r := range ready {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r)}})
	}
	return s
}

func TestWatcherAdvertisesControlPlanes(t *testing.T) {
	client := fake.NewClientset(testNode("node-a", "z1"), testNode("node-b", "z2"),
		cpSlice(discoveryv1.AddressTypeIPv4, "cp-v4", map[string]bool{"10.0.0.2": true, "10.0.0.1": false}))
	rec := runWatcher(t, client, nodeview.Options{
		AdvertiseService: model.ServiceKey{Namespace: "switchyard-system", Name: "switchyard-controlplane"},
	})
	ctx := t.Context()
	addrs := func(node string) []string { return rec.config(t, node).GetControlPlaneAddresses() }
	if diff := cmp.Diff([]string{"10.0.0.2:18000"}, addrs("node-a")); diff != "" {
		t.Errorf("initial control_plane_addresses (-want +got):\n%s", diff)
	}

	// The other replica becomes ready and the Service goes dual-stack:
	// every node gets the new list, sorted.
	if _, err := client.DiscoveryV1().EndpointSlices("switchyard-system").Update(ctx,
		cpSlice(discoveryv1.AddressTypeIPv4, "cp-v4", map[string]bool{"10.0.0.2": true, "10.0.0.1": true}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("switchyard-system").Create(ctx,
		cpSlice(discoveryv1.AddressTypeIPv6, "cp-v6", map[string]bool{"fd00::1": true}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1:18000", "10.0.0.2:18000", "[fd00::1]:18000"}
	for _, node := range []string{"node-a", "node-b"} {
		eventually(t, "new list on "+node, func() bool { return cmp.Equal(want, addrs(node)) })
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, node := range []string{"node-a", "node-b"} {
		if !slices.Contains(rec.changed[node], node) {
			t.Errorf("%s published with changed=%v, want its NodeConfig named", node, rec.changed[node])
		}
	}
}
