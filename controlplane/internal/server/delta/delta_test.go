package delta_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// summary is a comparable digest of one or more responses.
type summary struct {
	Version   string
	Resources []string // name@version
	Removed   []string
}

func summarize(parts ...*switchyardv1.DeltaSnapshotsResponse) summary {
	var s summary
	for _, p := range parts {
		s.Version = p.GetSystemVersion()
		for _, r := range p.GetResources() {
			s.Resources = append(s.Resources, r.GetName()+"@"+r.GetVersion())
		}
		s.Removed = append(s.Removed, p.GetRemovedResources()...)
	}
	return s
}

func refs(views ...*cache.View) []string {
	var out []string
	for _, v := range views {
		out = append(out, v.Name+"@"+v.Version)
	}
	return out
}

func versions(nv cache.NodeView) map[string]string {
	m := map[string]string{}
	nv.Range(func(v *cache.View) bool {
		m[v.Name] = v.Version
		return true
	})
	return m
}

func svc(t *testing.T, i int, gen uint32) *cache.View {
	return cachetest.MustView(t, cachetest.Service("ns", fmt.Sprintf("svc-%03d", i), fmt.Sprintf("10.96.0.%d", i+1), 1000+gen))
}

func TestFirstRequestMustNameNode(t *testing.T) {
	h := start(t, cache.New(), stream.Options{})
	cl := h.open(t, "", nil, true)
	if got := cl.Ended(); got != codes.InvalidArgument {
		t.Errorf("stream ended with %v, want InvalidArgument", got)
	}
}

func TestAck(t *testing.T) {
	c, nv1 := servertest.Published("n1", cachetest.Services(t, "ns", 3, 0)...)
	h := start(t, c, stream.Options{ControlPlaneID: "cp-1"})
	cl := h.open(t, "n1", nil, true)

	r1 := cl.Recv()
	want, err := cachetest.Resources(nv1)
	if err != nil {
		t.Fatal(err)
	}
	wantResp := &switchyardv1.DeltaSnapshotsResponse{
		SystemVersion:  nv1.Version(),
		Resources:      want,
		Nonce:          r1.GetNonce(),
		ControlPlaneId: "cp-1",
	}
	if diff := cmp.Diff(wantResp, r1, protocmp.Transform()); diff != "" {
		t.Errorf("first response (-want +got):\n%s", diff)
	}
	if r1.GetNonce() == "" {
		t.Error("response without a nonce")
	}

	cl.Ack(r1, &switchyardv1.ApplyReport{
		ApplyDuration:      durationpb.New(5 * time.Millisecond),
		ProgrammingLatency: durationpb.New(250 * time.Millisecond),
	})
	servertest.WaitAcked(t, h.cache, "n1", nv1.Version())
	if st := h.status("n1"); st.LastProgrammingLatency != 250*time.Millisecond || st.LastApplyDuration != 5*time.Millisecond {
		t.Errorf("report not recorded: %+v", st)
	}

	changed := svc(t, 1, 7)
	nv2 := nv1.With(changed)
	c.Publish("n1", nv2, []string{changed.Name})
	r2 := cl.Recv()
	if diff := cmp.Diff(summary{Version: nv2.Version(), Resources: refs(changed)}, summarize(r2)); diff != "" {
		t.Errorf("delta (-want +got):\n%s", diff)
	}
	if r2.GetNonce() == r1.GetNonce() {
		t.Errorf("nonce %q reused", r2.GetNonce())
	}
	cl.Ack(r2, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv2.Version())
}

func TestNackHoldsUntilContentChanges(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0), svc(t, 2, 0))
	// Before the retry's backoff (TestNackRetried) the rejected version
	// is held.
	h := start(t, c, stream.Options{NackRetry: time.Hour, NackRetryMax: time.Hour})
	cl := h.openAcked(t, "n1", nv1)

	bad := svc(t, 1, 99)
	nv2 := nv1.With(bad)
	c.Publish("n1", nv2, []string{bad.Name})
	r2 := cl.Recv()
	cl.nack(r2.GetNonce(), "bad port")
	servertest.Eventually(t, "NACK recorded", func() bool {
		st := h.status("n1")
		return st.LastNack != nil && st.Pending.InFlight == 0
	})
	st := h.status("n1")
	if st.AckedVersion != nv1.Version() || st.LastNack.GetMessage() != "bad port" {
		t.Errorf("after NACK: acked %q (want %q), last NACK %v", st.AckedVersion, nv1.Version(), st.LastNack)
	}
	sent := h.obs.responses.Load()

	// Wake the stream without changing content, twice (the same view and
	// an identical rebuild): the server takes the change and holds.
	c.Publish("n1", nv2, nil)
	servertest.Eventually(t, "wakeup taken", func() bool { return !h.status("n1").Pending.DirtyAll })
	c.Publish("n1", nv1.With(svc(t, 1, 99)), []string{bad.Name})
	servertest.Eventually(t, "wakeup taken", func() bool { return h.status("n1").Pending.DirtyNames == 0 })
	if got := h.obs.responses.Load(); got != sent {
		t.Fatalf("rejected content was resent: %d responses, want %d", got, sent)
	}

	// New content: sent at once, and it still carries the rejected name
	// the agent does not have.
	other := svc(t, 2, 5)
	nv3 := nv2.With(other)
	c.Publish("n1", nv3, []string{other.Name})
	r3 := cl.Recv()
	if diff := cmp.Diff(summary{Version: nv3.Version(), Resources: refs(bad, other)}, summarize(r3)); diff != "" {
		t.Errorf("response after new content (-want +got):\n%s", diff)
	}
	cl.Ack(r3, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv3.Version())
	if got := h.obs.nacks.Load(); got != 1 {
		t.Errorf("%d NACKs counted, want 1", got)
	}
}

// TestNackRetried: a rejected version is sent again after the backoff,
// doubled per consecutive NACK, until the agent takes it; the ACK ends
// the retries. A kernel's refusal is often transient (the xtables lock).
func TestNackRetried(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0))
	const base = 30 * time.Millisecond
	h := start(t, c, stream.Options{NackRetry: base, NackRetryMax: 4 * base})
	cl := h.openAcked(t, "n1", nv1)

	bad := svc(t, 1, 99)
	nv2 := nv1.With(bad)
	c.Publish("n1", nv2, []string{bad.Name})
	r := cl.Recv()
	nonces := map[string]bool{r.GetNonce(): true}
	for i, want := range []time.Duration{base, 2 * base, 4 * base, 4 * base} {
		nacked := time.Now()
		cl.nack(r.GetNonce(), "xtables lock held")
		r = cl.Recv()
		waited := time.Since(nacked)
		if waited < want {
			t.Errorf("retry %d came %v after the NACK, want at least the backoff %v", i+1, waited, want)
		}
		if diff := cmp.Diff(summary{Version: nv2.Version(), Resources: refs(bad)}, summarize(r)); diff != "" {
			t.Fatalf("retry %d (-want +got):\n%s", i+1, diff)
		}
		if nonces[r.GetNonce()] {
			t.Fatalf("retry %d reused nonce %q", i+1, r.GetNonce())
		}
		nonces[r.GetNonce()] = true
	}
	cl.Ack(r, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv2.Version())
	sent := h.obs.responses.Load()
	time.Sleep(8 * base) // longer than any backoff: nothing may follow an ACK
	if got := h.obs.responses.Load(); got != sent {
		t.Errorf("%d responses after the ACK, want none", got-sent)
	}
	if got := h.obs.nacks.Load(); got != 4 {
		t.Errorf("%d NACKs counted, want 4", got)
	}
}

func TestStaleNonceIgnored(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0))
	h := start(t, c, stream.Options{})
	cl := h.open(t, "n1", nil, true)
	r1 := cl.Recv()

	// A NACK of a nonce never sent, then the real ACK: the NACK is ignored.
	cl.nack("999", "stale")
	cl.Ack(r1, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv1.Version())
	if st := h.status("n1"); st.LastNack != nil {
		t.Fatalf("stale NACK recorded: %v", st.LastNack)
	}

	nv2 := nv1.With(svc(t, 0, 1))
	c.Publish("n1", nv2, []string{"ns/svc-000"})
	r2 := cl.Recv()
	// Re-ACKing the previous response must not acknowledge r2; the NACK
	// that follows answers r2, proving the stale ACK was ignored.
	cl.Ack(r1, nil)
	cl.nack(r2.GetNonce(), "rejected")
	servertest.Eventually(t, "NACK", func() bool { return h.status("n1").LastNack != nil })
	if got := h.status("n1").AckedVersion; got != nv1.Version() {
		t.Errorf("acked version %q, want %q: a stale ACK was taken", got, nv1.Version())
	}
}

func TestInitialResourceVersions(t *testing.T) {
	views := []*cache.View{svc(t, 0, 0), svc(t, 1, 0), svc(t, 2, 0), svc(t, 3, 0)}
	nv := cachetest.NewNodeView(views...)
	tests := []struct {
		name    string
		initial map[string]string
		want    summary
	}{
		{
			name: "no state gets everything",
			want: summary{Version: nv.Version(), Resources: refs(views...)},
		},
		{
			name:    "in sync gets an empty response with the version",
			initial: versions(nv),
			want:    summary{Version: nv.Version()},
		},
		{
			name: "only the difference",
			initial: map[string]string{
				"ns/svc-000": views[0].Version,
				"ns/svc-001": "stale",
				"ns/svc-003": views[3].Version,
				"ns/old":     "x",
			},
			want: summary{Version: nv.Version(), Resources: refs(views[1], views[2]), Removed: []string{"ns/old"}},
		},
	}
	c := cache.New()
	h := start(t, c, stream.Options{})
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := fmt.Sprintf("n%d", i)
			c.Publish(node, nv, nil)
			cl := h.open(t, node, tt.initial, true)
			if diff := cmp.Diff(tt.want, summarize(cl.Recv())); diff != "" {
				t.Errorf("first response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconnectGetsOnlyDiff(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0), svc(t, 2, 0))
	h := start(t, c, stream.Options{})
	cl := h.open(t, "n1", nil, true)
	r1 := cl.Recv()
	cl.Ack(r1, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv1.Version())
	cl.Cancel()
	servertest.Eventually(t, "disconnect", func() bool { return !h.status("n1").Connected })

	// While the agent is away: one service changes, one goes.
	changed := svc(t, 1, 3)
	nv2 := nv1.With(changed).Without("ns/svc-002")
	c.Publish("n1", nv2, []string{"ns/svc-001", "ns/svc-002"})

	have := map[string]string{}
	for _, r := range r1.GetResources() {
		have[r.GetName()] = r.GetVersion()
	}
	cl2 := h.open(t, "n1", have, true)
	want := summary{Version: nv2.Version(), Resources: refs(changed), Removed: []string{"ns/svc-002"}}
	if diff := cmp.Diff(want, summarize(cl2.Recv())); diff != "" {
		t.Errorf("reconnect response (-want +got):\n%s", diff)
	}
	// First stream: 3 sent; the reconnect: svc-000 resumed, svc-001 sent.
	if got, want := [2]int64{h.obs.resumed.Load(), h.obs.sent.Load()}, [2]int64{1, 4}; got != want {
		t.Errorf("(resumed, sent) = %v, want %v", got, want)
	}
}

func TestRemoval(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0))
	h := start(t, c, stream.Options{})
	cl := h.open(t, "n1", nil, true)
	cl.Ack(cl.Recv(), nil)

	nv2 := nv1.Without("ns/svc-001")
	c.Publish("n1", nv2, []string{"ns/svc-001"})
	r := cl.Recv()
	want := summary{Version: nv2.Version(), Removed: []string{"ns/svc-001"}}
	if diff := cmp.Diff(want, summarize(r)); diff != "" {
		t.Errorf("removal (-want +got):\n%s", diff)
	}
}

// TestCoalescesBursts: changes arriving inside the window after a flush go
// out as one response when the window ends, carrying the newest view.
func TestCoalescesBursts(t *testing.T) {
	c, nv := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0), svc(t, 2, 0))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	h := start(t, c, stream.Options{CoalesceWindow: 200 * time.Millisecond, Clock: clk})
	cl := h.openAcked(t, "n1", nv)

	burst := make([]*cache.View, 20)
	for i := range burst {
		burst[i] = svc(t, i%3, uint32(i+1))
	}
	for _, v := range burst {
		nv = nv.With(v)
		c.Publish("n1", nv, []string{v.Name})
	}
	servertest.Eventually(t, "the coalesce timer", clk.HasWaiters)
	clk.Step(200 * time.Millisecond)
	r := cl.Recv()
	if r.GetSystemVersion() != nv.Version() {
		t.Errorf("coalesced response has version %q, want the newest %q", r.GetSystemVersion(), nv.Version())
	}
	if diff := cmp.Diff(refs(burst[18], burst[19], burst[17]), summarize(r).Resources); diff != "" {
		t.Errorf("coalesced resources (-want +got):\n%s", diff)
	}
	// The observer counts a response after Send returned, which may be
	// after the client read it.
	servertest.Eventually(t, "2 responses counted", func() bool { return h.obs.responses.Load() >= 2 })
	if got := h.obs.responses.Load(); got != 2 {
		t.Errorf("%d responses for one burst, want 2 (initial + one)", got)
	}
}

// TestLoneChangeGoesOutAtOnce: a change to a session idle for longer than
// the window is sent without waiting; one right after it waits the window.
func TestLoneChangeGoesOutAtOnce(t *testing.T) {
	c, nv := servertest.Published("n1", svc(t, 0, 0), svc(t, 1, 0))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	h := start(t, c, stream.Options{CoalesceWindow: 200 * time.Millisecond, Clock: clk})
	cl := h.openAcked(t, "n1", nv)

	clk.Step(time.Second) // idle for longer than the window
	lone := svc(t, 0, 1)
	nv = nv.With(lone)
	c.Publish("n1", nv, []string{lone.Name})
	r := cl.Recv() // the fake clock does not move: no timer was involved
	if diff := cmp.Diff(refs(lone), summarize(r).Resources); diff != "" {
		t.Errorf("lone change (-want +got):\n%s", diff)
	}
	cl.Ack(r, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv.Version())

	next := svc(t, 1, 1)
	nv = nv.With(next)
	c.Publish("n1", nv, []string{next.Name})
	servertest.Eventually(t, "the coalesce timer", clk.HasWaiters)
	select {
	case r := <-cl.Responses():
		t.Fatalf("sent inside the window: %v", summarize(r))
	default:
	}
	clk.Step(200 * time.Millisecond)
	if diff := cmp.Diff(refs(next), summarize(cl.Recv()).Resources); diff != "" {
		t.Errorf("change after the window (-want +got):\n%s", diff)
	}
}

func TestUnknownNodeWaitsForView(t *testing.T) {
	c := cache.New()
	h := start(t, c, stream.Options{})
	cl := h.open(t, "late", nil, true)
	servertest.Eventually(t, "connected", func() bool { return h.status("late").Connected })
	if st := h.status("late"); st.Known {
		t.Fatal("unknown node reported known")
	}
	nv := cachetest.NewNodeView(svc(t, 0, 0))
	c.Publish("late", nv, nil)
	if got := cl.Recv().GetSystemVersion(); got != nv.Version() {
		t.Errorf("version %q, want %q", got, nv.Version())
	}
}

func TestSecondStreamReplacesFirst(t *testing.T) {
	c, nv := servertest.Published("n1", svc(t, 0, 0))
	h := start(t, c, stream.Options{})
	first := h.open(t, "n1", nil, true)
	first.Recv()

	second := h.open(t, "n1", nil, true)
	r := second.Recv()
	if got := r.GetSystemVersion(); got != nv.Version() {
		t.Errorf("second stream got version %q, want %q", got, nv.Version())
	}
	if got := first.Ended(); got != codes.Aborted {
		t.Errorf("first stream ended with %v, want Aborted", got)
	}
	second.Ack(r, nil)
	servertest.Eventually(t, "ACK on the new stream", func() bool {
		st := h.status("n1")
		return st.Connected && st.AckedVersion == nv.Version()
	})
}

func TestTwoServersAgree(t *testing.T) {
	// Each replica builds its views on its own from the same resources.
	build := func() (*cachetest.NodeView, *cachetest.NodeView) {
		nv1 := cachetest.NewNodeView(cachetest.Services(t, "ns", 20, 0)...)
		return nv1, nv1.With(svc(t, 3, 8)).Without("ns/svc-007")
	}
	type result struct {
		first, second *switchyardv1.DeltaSnapshotsResponse
	}
	run := func(id string) result {
		c := cache.New()
		nv1, nv2 := build()
		c.Publish("n1", nv1, nil)
		h := start(t, c, stream.Options{ControlPlaneID: id})
		cl := h.open(t, "n1", nil, true)
		r1 := cl.Recv()
		cl.Ack(r1, nil)
		c.Publish("n1", nv2, []string{"ns/svc-003", "ns/svc-007"})
		return result{r1, cl.Recv()}
	}
	a, b := run("replica-a"), run("replica-b")
	wire := func(r *switchyardv1.DeltaSnapshotsResponse) []byte {
		r = proto.Clone(r).(*switchyardv1.DeltaSnapshotsResponse)
		r.Nonce, r.ControlPlaneId = "", ""
		out, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, pair := range [][2]*switchyardv1.DeltaSnapshotsResponse{{a.first, b.first}, {a.second, b.second}} {
		if pair[0].GetSystemVersion() != pair[1].GetSystemVersion() {
			t.Errorf("versions differ: %q vs %q", pair[0].GetSystemVersion(), pair[1].GetSystemVersion())
		}
		if string(wire(pair[0])) != string(wire(pair[1])) {
			t.Errorf("responses differ byte-wise:\n%v\n%v", pair[0], pair[1])
		}
	}
}

// TestReportRefresh: with nothing in flight, repeating the last ACK's
// nonce with a report updates what the agent reports (its datapath
// verdict) and nothing else; a refresh of an older nonce is stale.
func TestReportRefresh(t *testing.T) {
	c, nv1 := servertest.Published("n1", svc(t, 0, 0))
	h := start(t, c, stream.Options{})
	cl := h.open(t, "n1", nil, true)
	r1 := cl.Recv()
	cl.Ack(r1, &switchyardv1.ApplyReport{Datapath: &switchyardv1.DatapathStatus{Healthy: true}})
	servertest.WaitAcked(t, h.cache, "n1", nv1.Version())
	if dp := h.status("n1").Datapath; !dp.GetHealthy() {
		t.Fatalf("datapath after the ACK: %v", dp)
	}

	cl.Ack(r1, &switchyardv1.ApplyReport{Datapath: &switchyardv1.DatapathStatus{Healthy: false, Error: "probe timed out"}})
	servertest.Eventually(t, "report refresh", func() bool { return h.status("n1").Datapath.GetError() == "probe timed out" })
	if st := h.status("n1"); st.AckedVersion != nv1.Version() || st.Datapath.GetHealthy() {
		t.Errorf("after the refresh: acked %q datapath %v", st.AckedVersion, st.Datapath)
	}

	nv2 := nv1.With(svc(t, 0, 1))
	c.Publish("n1", nv2, []string{"ns/svc-000"})
	r2 := cl.Recv()
	cl.Ack(r2, nil)
	servertest.WaitAcked(t, h.cache, "n1", nv2.Version())
	// r1's nonce is no longer the last acknowledged: stale.
	cl.Ack(r1, &switchyardv1.ApplyReport{Datapath: &switchyardv1.DatapathStatus{Healthy: true, Error: "stale"}})
	cl.Ack(r2, &switchyardv1.ApplyReport{Datapath: &switchyardv1.DatapathStatus{Healthy: true}})
	servertest.Eventually(t, "refresh of the last ACK", func() bool { return h.status("n1").Datapath.GetHealthy() })
	if got := h.status("n1").Datapath.GetError(); got != "" {
		t.Errorf("a refresh of an older nonce was taken: %q", got)
	}
}
