package watch

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
)

// triggerSlice is a slice of service svc in namespace web with one
// endpoint and, unless trigger is empty, that trigger annotation.
func triggerSlice(name, svc, trigger string) *discoveryv1.EndpointSlice {
	s := testSlice("10.244.0.5")
	s.Name, s.Labels = name, map[string]string{discoveryv1.LabelServiceName: svc}
	if trigger != "" {
		s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trigger}
	}
	return s
}

// TestStoreTriggers: one batch's trigger times per service follow
// kube-proxy's endpoints change tracker: each slice added or updated
// brings its own annotation; a batch that deletes one of a service's
// slices (or moves one away) brings none for that service, since the
// deleted slice's annotation dates its last update, not the deletion;
// a Service-only change brings none; an annotation that does not parse
// brings none (and is counted by translate). Filtering by time (future,
// before the start) is the Tracker's (TestTrackerTriggers).
func TestStoreTriggers(t *testing.T) {
	t1, t2 := "2026-12-06T10:00:01Z", "2026-12-06T10:00:02.5Z"
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	front := model.ServiceKey{Namespace: "web", Name: "front"}
	back := model.ServiceKey{Namespace: "web", Name: "back"}
	tests := []struct {
		name    string
		before  []*discoveryv1.EndpointSlice // filed by an earlier batch
		put     []*discoveryv1.EndpointSlice // in the informer store for this batch
		deleted []string                     // slices gone from the informer store
		service bool                         // the batch also holds the Service front
		want    map[model.ServiceKey][]time.Time
	}{
		{name: "slice added", put: []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1)},
			want: map[model.ServiceKey][]time.Time{front: {at(t1)}}},
		{name: "slice updated",
			before: []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1)},
			put:    []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t2)},
			want:   map[model.ServiceKey][]time.Time{front: {at(t2)}}},
		{name: "two slices of one service, one time each",
			put:  []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1), triggerSlice("front-b", "front", t2)},
			want: map[model.ServiceKey][]time.Time{front: {at(t1), at(t2)}}},
		{name: "Service-only change", service: true,
			before: []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1)},
			want:   map[model.ServiceKey][]time.Time{}},
		{name: "slice deleted, the other kept",
			before:  []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1), triggerSlice("front-b", "front", t2)},
			deleted: []string{"front-a"},
			want:    map[model.ServiceKey][]time.Time{}},
		{name: "a deletion in the batch drops the service's other times",
			before:  []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1)},
			put:     []*discoveryv1.EndpointSlice{triggerSlice("front-b", "front", t2)},
			deleted: []string{"front-a"},
			want:    map[model.ServiceKey][]time.Time{}},
		{name: "slice moved to another service: only the new one's",
			before: []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", t1)},
			put:    []*discoveryv1.EndpointSlice{triggerSlice("front-a", "back", t2)},
			want:   map[model.ServiceKey][]time.Time{back: {at(t2)}}},
		{name: "no annotation", put: []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", "")},
			want: map[model.ServiceKey][]time.Time{}},
		{name: "garbage annotation", put: []*discoveryv1.EndpointSlice{triggerSlice("front-a", "front", "not-a-time")},
			want: map[model.ServiceKey][]time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newTestStore()
			file := func(slices []*discoveryv1.EndpointSlice) batch {
				b := batch{slices: map[model.SliceKey]struct{}{}, services: map[model.ServiceKey]struct{}{}}
				for _, s := range slices {
					if err := st.slices.Add(s); err != nil {
						t.Fatal(err)
					}
					b.slices[model.SliceKey{Namespace: s.Namespace, Name: s.Name}] = struct{}{}
				}
				return b
			}
			st.apply(file(tc.before))
			b := file(tc.put)
			for _, name := range tc.deleted {
				obj, _, _ := st.slices.GetByKey("web/" + name)
				if err := st.slices.Delete(obj); err != nil {
					t.Fatal(err)
				}
				b.slices[model.SliceKey{Namespace: "web", Name: name}] = struct{}{}
			}
			if tc.service {
				b.services[front] = struct{}{}
			}
			got := st.apply(b).triggers
			for _, times := range got {
				slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("triggers (-want +got):\n%s", diff)
			}
		})
	}
}

func newTestStore() *store {
	svcs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, name := range []string{"front", "back"} {
		s := testService()
		s.Name = name
		_ = svcs.Add(s)
	}
	return &store{
		st: model.NewState(), log: slog.New(slog.DiscardHandler), owner: map[model.SliceKey]model.ServiceKey{},
		services: svcs, slices: cache.NewStore(cache.MetaNamespaceKeyFunc), nodes: cache.NewStore(cache.MetaNamespaceKeyFunc),
	}
}

// TestServiceTriggers: a change's trigger times reach every node unless
// the change reached only some nodes' own views (a Local policy); a zone's
// view counts as every node, as zones are not told apart.
func TestServiceTriggers(t *testing.T) {
	t1 := time.Date(2026, 12, 6, 10, 0, 1, 0, time.UTC)
	times := map[model.ServiceKey][]time.Time{{Namespace: "web", Name: "front"}: {t1}}
	tests := []struct {
		name string
		ch   nodeview.Changes
		want map[string]fleetlatency.Trigger
	}{
		{name: "default view changed", ch: nodeview.Changes{Names: []string{"web/front"}},
			want: map[string]fleetlatency.Trigger{"web/front": {Times: []time.Time{t1}}}},
		{name: "a zone's view", ch: nodeview.Changes{Zones: map[string][]string{"z1": {"web/front"}}, Nodes: map[string][]string{"node-b": {"web/front"}}},
			want: map[string]fleetlatency.Trigger{"web/front": {Times: []time.Time{t1}}}},
		{name: "two nodes' own views", ch: nodeview.Changes{Nodes: map[string][]string{"node-b": {"web/front"}, "node-c": {"web/front", "web/other"}}},
			want: map[string]fleetlatency.Trigger{"web/front": {Times: []time.Time{t1}, Nodes: []string{"node-b", "node-c"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := serviceTriggers(tc.ch, times)
			for name, tr := range got {
				if tr.Nodes != nil {
					tr.Nodes = sortedStrings(tr.Nodes)
					got[name] = tr
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("serviceTriggers (-want +got):\n%s", diff)
			}
		})
	}
	if got := serviceTriggers(nodeview.Changes{Names: []string{"web/front"}}, nil); got != nil {
		t.Errorf("no trigger times: %v, want nil", got)
	}
}

func sortedStrings(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
