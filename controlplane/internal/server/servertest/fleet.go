package servertest

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/admin"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Fleet is AdminService over a cache of three nodes, node-a, node-b and node-c, each
// with NS/web (10.96.0.10:80) and NS/db (10.96.0.20:5432), whose agents
// connected and acknowledged their first view; the fleet latency tracker
// is wired as the daemon wires it. Time is a fake clock that Change and
// Ack move, so latencies are exact.
type Fleet struct {
	Clock   *clocktesting.FakeClock
	Tracker *fleetlatency.Tracker
	Cache   *cache.Cache
	Web, DB *cache.View // the services' first views
	Addr    string
	Client  switchyardv1.AdminServiceClient

	views   map[string]*cachetest.NodeView
	watches map[string]*cache.Watch
	changed time.Time
}

// NewFleet serves a Fleet in namespace ns; api and st (may be nil) are
// the admin server's API watch and settings.
func NewFleet(t testing.TB, ns string, api admin.APIWatch, st admin.Settings) *Fleet {
	t.Helper()
	f := &Fleet{Clock: clocktesting.NewFakeClock(time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)),
		views: map[string]*cachetest.NodeView{}, watches: map[string]*cache.Watch{}}
	f.Tracker = fleetlatency.New(fleetlatency.WithClock(f.Clock))
	f.Cache = cache.New(cache.WithClock(f.Clock), cache.WithApplyObserver(f.Tracker))
	f.Web = cachetest.MustView(t, cachetest.Service(ns, "web", "10.96.0.10", 80))
	f.DB = cachetest.MustView(t, cachetest.Service(ns, "db", "10.96.0.20", 5432))
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		f.views[node] = cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig(node, "zone-1")), f.Web, f.DB)
		f.Cache.Publish(node, f.views[node], nil)
		w := f.Cache.Watch(node, &switchyardv1.Node{Name: node}, "delta")
		nv, _ := w.Take()
		w.Acked(nv, nil)
		f.watches[node] = w
	}
	f.Addr, f.Client = ServeAdmin(t, admin.New(f.Cache, api, st).WithLatency(f.Tracker))
	return f
}

// Change records v's service as changed a minute later and publishes it
// to every node, as the watch does.
func (f *Fleet) Change(v *cache.View) {
	f.Clock.Step(time.Minute)
	f.changed = f.Clock.Now()
	f.Tracker.ServicesChanged([]string{v.Name}, nil, nil)
	for node, nv := range f.views {
		f.views[node] = nv.With(v)
		f.Cache.Publish(node, f.views[node], []string{v.Name})
	}
}

// Ack has node's stream take its newest view and its agent acknowledge
// it, after after since the latest Change.
func (f *Fleet) Ack(node string, after time.Duration) {
	w := f.watches[node]
	nv, _ := w.Take()
	f.Clock.SetTime(f.changed.Add(after))
	w.Acked(nv, nil)
}
