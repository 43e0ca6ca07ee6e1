package watch

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"google.golang.org/protobuf/proto"

	cpcache "github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// recorder is a Publisher that keeps each node's newest view.
type recorder struct {
	mu      sync.Mutex
	views   map[string]cpcache.NodeView
	changed map[string][]string
	removed []string
}

func newRecorder() *recorder {
	return &recorder{views: map[string]cpcache.NodeView{}, changed: map[string][]string{}}
}

func (r *recorder) Publish(node string, nv cpcache.NodeView, changed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.views[node] = nv
	r.changed[node] = changed
}

func (r *recorder) Remove(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.views, node)
	r.removed = append(r.removed, node)
}

// resource returns the Resource named name in node's newest view, or nil.
func (r *recorder) resource(t *testing.T, node, name string) *switchyardv1.Resource {
	t.Helper()
	r.mu.Lock()
	nv := r.views[node]
	r.mu.Unlock()
	if nv == nil {
		return nil
	}
	v, ok := nv.Get(name)
	if !ok {
		return nil
	}
	res := &switchyardv1.Resource{}
	if err := proto.Unmarshal(v.Bytes, res); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return res
}

// service returns the ServiceView node has for name, or nil.
func (r *recorder) service(t *testing.T, node, name string) *switchyardv1.ServiceView {
	t.Helper()
	return r.resource(t, node, name).GetService()
}

func (r *recorder) hasNode(node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.views[node]
	return ok
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "front",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
}

func testSlice(addrs ...string) *discoveryv1.EndpointSlice {
	name, port, proto := "http", int32(8080), corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "front-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: "front"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}
	for _, a := range addrs {
		node := "node-a"
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: &node})
	}
	return s
}

func testNode(name, zone string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
}

func addresses(sv *switchyardv1.ServiceView) []string {
	var out []string
	for _, ep := range sv.GetClusterEndpoints() {
		out = append(out, ep.GetAddress())
	}
	slices.Sort(out)
	return out
}

func TestWatcherFollowsTheAPI(t *testing.T) {
	client := fake.NewClientset(testService(), testSlice("10.244.0.5"),
		testNode("node-a", "z1"), testNode("node-b", "z2"))
	rec := runWatcher(t, client, nodeview.Options{})
	ctx := t.Context()
	for _, node := range []string{"node-a", "node-b"} {
		sv := rec.service(t, node, "web/front")
		if sv == nil || !slices.Equal(addresses(sv), []string{"10.244.0.5"}) {
			t.Fatalf("%s: initial view %v, want endpoint 10.244.0.5", node, sv)
		}
	}

	// Scale up: one more endpoint reaches every node.
	if _, err := client.DiscoveryV1().EndpointSlices("web").Update(ctx, testSlice("10.244.0.5", "10.244.1.7"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scaled-up view on node-b", func() bool {
		sv := rec.service(t, "node-b", "web/front")
		return sv != nil && slices.Equal(addresses(sv), []string{"10.244.0.5", "10.244.1.7"})
	})
	rec.mu.Lock()
	if !slices.Contains(rec.changed["node-b"], "web/front") {
		t.Errorf("node-b published with changed=%v, want it to name web/front", rec.changed["node-b"])
	}
	rec.mu.Unlock()

	// Delete the service: its view goes from every node.
	if err := client.CoreV1().Services("web").Delete(ctx, "front", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "service removed from node-a", func() bool { return rec.service(t, "node-a", "web/front") == nil })

	// Delete a node: its view is removed from the cache.
	if err := client.CoreV1().Nodes().Delete(ctx, "node-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-b removed", func() bool { return !rec.hasNode("node-b") })
}

func TestStripObject(t *testing.T) {
	s := testSlice("10.0.0.1")
	s.Annotations = map[string]string{triggerTimeAnnotation: "2026-11-30T10:00:00Z", "other": "x"}
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	n := testNode("n", "z")
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"img"}}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}
	svc := testService()
	svc.Annotations = map[string]string{triggerTimeAnnotation: "x", serviceport.AnnotationLoadBalancing: "maglev"}
	for _, o := range []any{s, n, svc} {
		if _, err := stripObject(o); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.ManagedFields) != 0 || len(s.Annotations) != 1 || s.Annotations[triggerTimeAnnotation] == "" {
		t.Errorf("slice after strip: managedFields=%v annotations=%v", s.ManagedFields, s.Annotations)
	}
	if len(n.Status.Images) != 0 || len(n.Status.Addresses) != 1 {
		t.Errorf("node after strip: images=%v addresses=%v", n.Status.Images, n.Status.Addresses)
	}
	// The load-balancing annotation is read (translate.Service): a
	// strip that dropped it made every annotated Service random, which
	// only a test through the informers saw (e2e/system testMaglev).
	if len(svc.Annotations) != 1 || svc.Annotations[serviceport.AnnotationLoadBalancing] != "maglev" || len(svc.ManagedFields) != 0 {
		t.Errorf("service after strip keeps %v / %v", svc.Annotations, svc.ManagedFields)
	}
}
