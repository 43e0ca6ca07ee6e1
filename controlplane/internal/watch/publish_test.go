package watch

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
)

var _ ServiceObserver = (*fleetlatency.Tracker)(nil)

func TestChangedServices(t *testing.T) {
	st := &model.State{Nodes: map[string]*model.Node{"node-a": {}, "node-b": {}}}
	tests := []struct {
		name string
		ch   nodeview.Changes
		want []string
	}{
		{name: "nothing", want: nil},
		{name: "NodeConfigs and removals are not changes", ch: nodeview.Changes{Removed: []string{"a/x"}, ConfigNodes: []string{"node-a"}, AllConfigs: true}},
		{
			name: "every node, a zone's and one node's, once each",
			ch: nodeview.Changes{
				Names: []string{"a/web", "b/db"},
				Zones: map[string][]string{"z1": {"a/web", "c/zoned"}, "z2": {"c/zoned"}},
				Nodes: map[string][]string{"node-a": {"d/local"}, "node-b": {"d/local", "a/web"}},
			},
			want: []string{"a/web", "b/db", "c/zoned", "d/local"},
		},
		{
			name: "not for a node deleted",
			ch:   nodeview.Changes{Nodes: map[string][]string{"node-gone": {"d/local"}}},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, changedServices(tt.ch, st)); d != "" {
				t.Errorf("changedServices (-want +got):\n%s", d)
			}
		})
	}
}

// serviceCalls is a ServiceObserver that records each call and, at each,
// what node-b's published view of web/front then had.
type serviceCalls struct {
	t   *testing.T
	rec *recorder

	mu    sync.Mutex
	calls []serviceCall
}

type serviceCall struct {
	Changed, Removed []string
	// Before: node-b's endpoints of web/front when the call came.
	Before []string
}

func (s *serviceCalls) ServicesChanged(changed, removed []string, _ map[string]fleetlatency.Trigger) {
	if len(changed) == 0 && len(removed) == 0 {
		return // an update that changed no service (still a generation)
	}
	before := addresses(s.rec.service(s.t, "node-b", "web/front"))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, serviceCall{slices.Clone(changed), slices.Clone(removed), before})
}

func (s *serviceCalls) get() []serviceCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// TestObservedPublisher: the observer of an ObservedPublisher learns which
// services each update changed or removed, before the update's views are
// published; the first views are no change.
func TestObservedPublisher(t *testing.T) {
	client := fake.NewClientset(testService(), testSlice("10.244.0.5"), testNode("node-a", "z1"), testNode("node-b", "z2"))
	rec := newRecorder()
	obs := &serviceCalls{t: t, rec: rec}
	startWatcher(t, Config{Client: client, Publisher: ObservedPublisher{Publisher: rec, Services: obs}})
	ctx := t.Context()

	if _, err := client.DiscoveryV1().EndpointSlices("web").Update(ctx, testSlice("10.244.0.5", "10.244.1.7"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "scaled-up view on node-b", func() bool {
		return slices.Equal(addresses(rec.service(t, "node-b", "web/front")), []string{"10.244.0.5", "10.244.1.7"})
	})
	if err := client.CoreV1().Services("web").Delete(ctx, "front", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "service removed from node-b", func() bool { return rec.service(t, "node-b", "web/front") == nil })

	want := []serviceCall{
		{Changed: []string{"web/front"}, Before: []string{"10.244.0.5"}},
		{Removed: []string{"web/front"}, Before: []string{"10.244.0.5", "10.244.1.7"}},
	}
	if d := cmp.Diff(want, obs.get()); d != "" {
		t.Errorf("ServicesChanged calls (-want +got):\n%s", d)
	}
}
