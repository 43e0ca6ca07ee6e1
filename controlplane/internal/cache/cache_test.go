package cache_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func agent(name string) *switchyardv1.Node {
	return &switchyardv1.Node{Name: name, AgentVersion: "test"}
}

func ready(w *cache.Watch) bool {
	select {
	case <-w.Ready():
		return true
	default:
		return false
	}
}

func TestWatchTakeCoalesces(t *testing.T) {
	c := cache.New()
	views := cachetest.Services(t, "ns", 4, 0)
	nv := cachetest.NewNodeView(views...)
	c.Publish("n1", nv, nil)

	w := c.Watch("n1", agent("n1"), "delta")
	got, ch := w.Take()
	if got != nv || !ch.All {
		t.Fatalf("first Take = %v, %+v; want the view and All", got, ch)
	}

	// Three publishes coalesce into one signal and one change set, and
	// Take returns only the newest view.
	nv2 := nv.With(cachetest.MustView(t, cachetest.Service("ns", "svc-001", "10.96.9.9", 1)))
	c.Publish("n1", nv2, []string{"ns/svc-001"})
	nv3 := nv2.Without("ns/svc-002")
	c.Publish("n1", nv3, []string{"ns/svc-002"})
	nv4 := nv3.With(cachetest.MustView(t, cachetest.Service("ns", "svc-001", "10.96.9.8", 1)))
	c.Publish("n1", nv4, []string{"ns/svc-001"})

	if !ready(w) {
		t.Fatal("no signal after Publish")
	}
	got, ch = w.Take()
	if got != nv4 {
		t.Errorf("Take returned %s, want newest %s", got.Version(), nv4.Version())
	}
	if diff := cmp.Diff(cache.Changes{Names: []string{"ns/svc-001", "ns/svc-002"}}, ch); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if ready(w) {
		t.Error("signal still pending after Take")
	}
}

func TestDirtySetIsBounded(t *testing.T) {
	c := cache.New()
	nv := cachetest.NewNodeView(cachetest.Services(t, "ns", 10, 0)...)
	c.Publish("n1", nv, nil)
	w := c.Watch("n1", agent("n1"), "delta")
	w.Take()

	for i := range 1000 {
		c.Publish("n1", nv, []string{fmt.Sprintf("gone/%d", i%7)})
	}
	snap, _ := c.Node("n1")
	if p := snap.Status.Pending; p.DirtyNames > nv.Len() {
		t.Errorf("dirty set holds %d names, more than the view's %d", p.DirtyNames, nv.Len())
	}
	for i := range 100 {
		c.Publish("n1", nv, []string{fmt.Sprintf("gone/x%d", i)})
	}
	snap, _ = c.Node("n1")
	if p := snap.Status.Pending; p.DirtyNames != 0 || !p.DirtyAll {
		t.Errorf("pending = %+v, want collapsed to DirtyAll", p)
	}
	if _, ch := w.Take(); !ch.All {
		t.Errorf("Take after overflow = %+v, want All", ch)
	}
}

func TestWatchReplaceAndClose(t *testing.T) {
	c := cache.New()
	c.Publish("n1", cachetest.NewNodeView(), nil)
	w1 := c.Watch("n1", agent("n1"), "delta")
	w2 := c.Watch("n1", agent("n1"), "sotw")

	select {
	case <-w1.Done():
	default:
		t.Fatal("first watch not done after replacement")
	}
	// The replaced stream's late close and ACK must not touch the node.
	w1.Acked(cachetest.NewNodeView(), nil)
	w1.Close()
	snap, _ := c.Node("n1")
	if !snap.Status.Connected || snap.Status.RPC != "sotw" || snap.Status.AckedVersion != "" {
		t.Errorf("after stale close: %+v", snap.Status)
	}
	w2.Close()
	snap, _ = c.Node("n1")
	if snap.Status.Connected {
		t.Error("still connected after Close")
	}
}

func TestRemoveAndUnknownNodes(t *testing.T) {
	c := cache.New()
	c.Publish("known", cachetest.NewNodeView(), nil)
	c.Publish("gone", cachetest.NewNodeView(), nil)
	c.Remove("gone")
	w := c.Watch("stranger", agent("stranger"), "delta")

	var names []string
	for _, s := range c.Snapshot() {
		names = append(names, fmt.Sprintf("%s known=%t connected=%t", s.Status.Name, s.Status.Known, s.Status.Connected))
	}
	want := []string{"known known=true connected=false", "stranger known=false connected=true"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if nv, _ := w.Take(); nv != nil {
		t.Error("unknown node has a view")
	}
	w.Close()
	if _, ok := c.Node("stranger"); ok {
		t.Error("unknown node still listed after its agent left")
	}
}

func TestAckState(t *testing.T) {
	start := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	c := cache.New(cache.WithClock(clk))
	nv := cachetest.NewNodeView(cachetest.Services(t, "ns", 3, 0)...)
	c.Publish("n1", nv, nil)
	w := c.Watch("n1", agent("n1"), "delta")

	clk.SetTime(start.Add(time.Second))
	w.Acked(nv, &switchyardv1.ApplyReport{
		ApplyDuration:      durationpb.New(20 * time.Millisecond),
		ProgrammingLatency: durationpb.New(300 * time.Millisecond),
	})
	clk.SetTime(start.Add(2 * time.Second))
	nack := &spb.Status{Code: 3, Message: "bad port"}
	w.Nacked(nack)
	w.SetInFlight(1)

	snap, _ := c.Node("n1")
	want := cache.NodeStatus{
		Name:                       "n1",
		Known:                      true,
		DesiredVersion:             nv.Version(),
		Resources:                  3,
		Connected:                  true,
		RPC:                        "delta",
		Agent:                      agent("n1"),
		ConnectedSince:             start,
		AckedVersion:               nv.Version(),
		LastAck:                    start.Add(time.Second),
		LastApplyDuration:          20 * time.Millisecond,
		LastProgrammingLatency:     300 * time.Millisecond,
		LastProgrammingLatencyTime: start.Add(time.Second),
		LastNack:                   nack,
		LastNackTime:               start.Add(2 * time.Second),
		Pending:                    cache.Pending{DirtyAll: true, InFlight: 1},
	}
	if diff := cmp.Diff(want, snap.Status, cmpProto); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if snap.Acked != nv {
		t.Error("acked view not recorded")
	}
}

var cmpProto = protocmp.Transform()
