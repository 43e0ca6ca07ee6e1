package discovery_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// applier is a test Applier over a view.View with an injectable failure.
type applier struct {
	mu      sync.Mutex
	v       *view.View
	fail    error
	applied []*view.Update
}

func newApplier() *applier {
	return &applier{v: &view.View{Resources: map[string]*switchyardv1.Resource{}}}
}

func (a *applier) Versions() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v.Versions()
}

func (a *applier) Apply(_ context.Context, u *view.Update) (view.Applied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return view.Applied{}, a.fail
	}
	a.v = a.v.With(u)
	a.applied = append(a.applied, u)
	res := view.Applied{Duration: time.Millisecond, Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}
	if times := u.TriggerTimes(time.Time{}, time.Now()); len(times) > 0 {
		res.ProgrammingLatency, res.HasLatency = time.Since(times[0]), true
	}
	return res, nil
}

func (a *applier) setFail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = err
}

func (a *applier) versions() map[string]string { return a.Versions() }

// wantApplied fails the test unless the applier holds exactly want
// (name to version).
func (a *applier) wantApplied(t *testing.T, want map[string]string) {
	t.Helper()
	if diff := cmp.Diff(want, a.versions()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

func svc(name, version string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: name, Version: version, Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{}}}
}

// batch is a response carrying rs: the last part of a batch, versioned
// version, or with version "" a part that more parts follow.
func batch(version, nonce string, rs ...*switchyardv1.Resource) *switchyardv1.DeltaSnapshotsResponse {
	return &switchyardv1.DeltaSnapshotsResponse{SystemVersion: version, Nonce: nonce, Resources: rs}
}

// wantACK reads the agent's next request to cp and stops the test
// unless it ACKs version (not ""); it returns the request.
func wantACK(t *testing.T, cp *cptest.Server, version string) cptest.Request {
	t.Helper()
	r := cp.Next()
	if r.GetAppliedVersion() != version {
		t.Fatalf("ACK = %v", r)
	}
	return r
}

// connected starts an agent with a new applier against a new scripted
// control plane and reads its first request, so the test's first Push
// answers it.
func connected(t *testing.T) (*cptest.Server, *applier) {
	t.Helper()
	cp, a := cptest.New(t), newApplier()
	start(t, a, nil, cp.Addr())
	cp.Next()
	return cp, a
}

func start(t *testing.T, a discovery.Applier, clk *clocktesting.FakeClock, addrs ...string) {
	t.Helper()
	startWith(t, a, clk, nil, addrs...)
}

// startWith is start with edit applied to the client's Config (nil:
// none). It returns the client, running until the test ends.
func startWith(t *testing.T, a discovery.Applier, clk *clocktesting.FakeClock, edit func(*discovery.Config), addrs ...string) *discovery.Client {
	t.Helper()
	cfg := discovery.Config{
		Addresses:   addrs,
		Node:        &switchyardv1.Node{Name: "node-a", AgentVersion: "test"},
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Backoff:     discovery.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		Applier:     a,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Rand:        func() float64 { return 0.5 },
	}
	if clk != nil {
		cfg.Clock = clk
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := discovery.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, c.Run)
	return c
}

// TestSettingsHashReported: the settings hash the agent programs goes in
// the first request's Node (what it restored) and in each ACK report
// (what the apply left it programming).
func TestSettingsHashReported(t *testing.T) {
	cp := cptest.New(t)
	var hash atomic.Value
	hash.Store("restored")
	startWith(t, newApplier(), nil, func(c *discovery.Config) {
		c.CurrentSettingsHash = func() string { return hash.Load().(string) }
	}, cp.Addr())
	if got := cp.Next().GetNode().GetSettingsHash(); got != "restored" {
		t.Fatalf("first request settings_hash %q, want restored", got)
	}
	hash.Store("applied")
	cp.Push(batch("s1", "n1", svc("ns/a", "1")))
	if got := cp.Next().GetReport().GetSettingsHash(); got != "applied" {
		t.Errorf("ACK report settings_hash %q, want applied", got)
	}
}

func TestAckAfterApplyAndNack(t *testing.T) {
	cp := cptest.New(t)
	a := newApplier()
	start(t, a, nil, cp.Addr())

	first := cp.Next()
	if first.GetNode().GetName() != "node-a" || len(first.GetInitialResourceVersions()) != 0 || first.GetResponseNonce() != "" {
		t.Fatalf("first request = %v", first)
	}
	trigger := time.Now().Add(-time.Second)
	r := svc("ns/a", "1")
	cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s1", Nonce: "n1", Resources: []*switchyardv1.Resource{r},
		ChangeTriggers: []*switchyardv1.ChangeTriggers{{Name: "ns/a", TriggerTimes: []*timestamppb.Timestamp{timestamppb.New(trigger)}}}})
	ack := cp.Next()
	if ack.GetResponseNonce() != "n1" || ack.GetAppliedVersion() != "s1" || ack.GetErrorDetail() != nil {
		t.Fatalf("ACK = %v", ack)
	}
	if got := ack.GetReport().GetMode(); got != switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES {
		t.Errorf("report mode = %v, want the applied mode", got)
	}
	if got := ack.GetReport().GetApplyDuration().AsDuration(); got != time.Millisecond {
		t.Errorf("apply_duration = %v, want 1ms", got)
	}
	if got := ack.GetReport().GetProgrammingLatency().AsDuration(); got < time.Second {
		t.Errorf("programming_latency = %v, want >= 1s", got)
	}
	// The ACK came after the apply: the applier already holds the version.
	a.wantApplied(t, map[string]string{"ns/a": "1"})

	a.setFail(errors.New("iptables-restore: exit status 1"))
	cp.Push(batch("s2", "n2", svc("ns/a", "2")))
	nack := cp.Next()
	if nack.GetResponseNonce() != "n2" || nack.GetAppliedVersion() != "" || nack.GetErrorDetail() == nil {
		t.Fatalf("NACK = %v", nack)
	}
	if got := codes.Code(nack.GetErrorDetail().GetCode()); got != codes.Internal {
		t.Errorf("NACK code = %v", got)
	}
	a.wantApplied(t, map[string]string{"ns/a": "1"})
}

func TestSplitBatch(t *testing.T) {
	cp, a := connected(t)
	cp.Push(batch("", "p1", svc("ns/a", "1")))
	if r := cp.Next(); r.GetResponseNonce() != "p1" || r.GetAppliedVersion() != "" || r.GetErrorDetail() != nil || r.GetReport() != nil {
		t.Fatalf("ACK of part 1 = %v", r)
	}
	if len(a.versions()) != 0 {
		t.Fatalf("a partial part was applied: %v", a.versions())
	}
	cp.Push(batch("", "p2", svc("ns/b", "1")))
	if r := cp.Next(); r.GetResponseNonce() != "p2" || r.GetAppliedVersion() != "" {
		t.Fatalf("ACK of part 2 = %v", r)
	}
	cp.Push(batch("s1", "p3", svc("ns/c", "1")))
	if r := cp.Next(); r.GetResponseNonce() != "p3" || r.GetAppliedVersion() != "s1" {
		t.Fatalf("ACK of last part = %v", r)
	}
	a.wantApplied(t, map[string]string{"ns/a": "1", "ns/b": "1", "ns/c": "1"})
	a.mu.Lock()
	n := len(a.applied)
	a.mu.Unlock()
	if n != 1 {
		t.Errorf("applies = %d, want 1 (the union of the parts)", n)
	}
}

func TestSplitBatchAbandonedOnDisconnect(t *testing.T) {
	cp, a := connected(t)
	cp.Push(batch("", "p1", svc("ns/a", "1")))
	cp.Next()
	cp.EndStream(status.Error(codes.Aborted, "replaced by a newer stream"))
	again := cp.Next()
	if again.Stream != 2 || len(again.GetInitialResourceVersions()) != 0 {
		t.Fatalf("reconnect request = %v", again)
	}
	cp.Push(batch("s1", "n2", svc("ns/b", "1")))
	cp.Next()
	a.wantApplied(t, map[string]string{"ns/b": "1"})
}

func TestReconnectSendsInitialVersions(t *testing.T) {
	cp, a := connected(t)
	cp.Push(batch("s1", "n1", svc("ns/a", "1"), svc("ns/b", "1")))
	cp.Next()
	cp.EndStream(status.Error(codes.Aborted, "replaced by a newer stream"))
	again := cp.Next()
	if again.Stream != 2 || again.GetNode().GetName() != "node-a" {
		t.Fatalf("reconnect request = %v", again)
	}
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, again.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
	// The server sends only the difference; the agent merges it.
	cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s2", Nonce: "n2", Resources: []*switchyardv1.Resource{svc("ns/b", "2")}, RemovedResources: []string{"ns/a"}})
	wantACK(t, cp, "s2")
	a.wantApplied(t, map[string]string{"ns/b": "2"})
}

func TestFailover(t *testing.T) {
	// A loopback address with nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	cp := cptest.New(t)
	a := newApplier()
	start(t, a, nil, dead, cp.Addr())
	r := cp.Next()
	if r.GetNode().GetName() != "node-a" {
		t.Fatalf("first request on the second address = %v", r)
	}
	cp.Push(batch("s1", "n1", svc("ns/a", "1")))
	wantACK(t, cp, "s1")
}

// TestFailoverPrefersAdvertisedReplicas: when a stream that worked ends
// (its replica stopped), the agent dials the other replicas the control
// plane advertised before the configured addresses, whichever place the
// ended one had in the dial list. Walking on from the last advertised
// address would go through every configured one first, one dial timeout
// each for those that do not answer.
func TestFailoverPrefersAdvertisedReplicas(t *testing.T) {
	r1, r2, configured := cptest.New(t), cptest.New(t), cptest.New(t)
	replicas := map[string]*cptest.Server{r1.Addr(): r1, r2.Addr(): r2}
	c := startWith(t, newApplier(), nil, func(cfg *discovery.Config) { cfg.Learnt = []string{r1.Addr(), r2.Addr()} }, configured.Addr())
	order := c.Targets()
	first, second := replicas[order[0]], replicas[order[1]]
	first.Next()
	first.Push(batch("s1", "n1", svc("ns/a", "1")))
	wantACK(t, first, "s1")
	first.Stop()
	second.Next()
	second.Push(batch("s1", "n2", svc("ns/a", "1")))
	wantACK(t, second, "s1")
	// The second is last of the advertised addresses: the next in the
	// list is the configured one; the first replica is back.
	first.Restart()
	second.Stop()
	if r := first.Next(); r.GetNode().GetName() != "node-a" {
		t.Fatalf("third stream's first request = %v", r)
	}
	if n := configured.Streams(); n != 0 {
		t.Errorf("the configured address got %d streams, want none while an advertised replica answers", n)
	}
}

func TestBackoffWaitsOnClockWhileControlPlaneGone(t *testing.T) {
	cp := cptest.New(t)
	a := newApplier()
	clk := clocktesting.NewFakeClock(time.Now())
	start(t, a, clk, cp.Addr())
	cp.Next()
	cp.Push(batch("s1", "n1", svc("ns/a", "1")))
	cp.Next()
	cp.Stop()
	// 30 s of fake time without a control plane: each attempt waits on the
	// clock (never a tight loop), and nothing is applied.
	for elapsed := time.Duration(0); elapsed < 30*time.Second; elapsed += 40 * time.Millisecond {
		runtest.Eventually(t, "the backoff timer", clk.HasWaiters)
		clk.Step(40 * time.Millisecond)
	}
	if streams := cp.Streams(); streams != 1 {
		t.Errorf("streams = %d, want 1", streams)
	}
	a.wantApplied(t, map[string]string{"ns/a": "1"})
	cp.Restart()
	var again cptest.Request
	for again.DeltaSnapshotsRequest == nil {
		runtest.Eventually(t, "the backoff timer or the second stream", func() bool { return clk.HasWaiters() || cp.Streams() == 2 })
		if cp.Streams() == 2 {
			again = cp.Next()
			break
		}
		clk.Step(40 * time.Millisecond)
	}
	if diff := cmp.Diff(map[string]string{"ns/a": "1"}, again.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
}

func TestInvalidPartAbandonsBatch(t *testing.T) {
	cp, a := connected(t)
	cp.Push(batch("", "p1", svc("ns/a", "1")))
	cp.Next()
	cp.Push(batch("", "p2", &switchyardv1.Resource{Name: "ns/b", Version: "1"}))
	nack := cp.Next()
	if nack.GetResponseNonce() != "p2" || codes.Code(nack.GetErrorDetail().GetCode()) != codes.InvalidArgument {
		t.Fatalf("want NACK of p2, got %v", nack)
	}
	// The next complete batch does not carry the abandoned part.
	cp.Push(batch("s1", "n3", svc("ns/c", "1")))
	wantACK(t, cp, "s1")
	a.wantApplied(t, map[string]string{"ns/c": "1"})
}

// TestReportRefresh: a Refresh signal resends the current report with the
// nonce of the last batch acknowledged (none before the first ACK); a
// NACK does not move that nonce.
func TestReportRefresh(t *testing.T) {
	cp := cptest.New(t)
	a := newApplier()
	refresh := make(chan struct{}, 1)
	var healthy atomic.Bool
	healthy.Store(true)
	startWith(t, a, nil, func(c *discovery.Config) {
		c.Refresh = refresh
		c.CurrentDatapath = func() *switchyardv1.DatapathStatus {
			return &switchyardv1.DatapathStatus{Healthy: healthy.Load()}
		}
	}, cp.Addr())
	cp.Next()
	cp.Push(batch("s1", "n1", svc("ns/a", "1")))
	if ack := cp.Next(); !ack.GetReport().GetDatapath().GetHealthy() {
		t.Fatalf("ACK report datapath = %v, want healthy", ack.GetReport().GetDatapath())
	}
	a.setFail(errors.New("no"))
	cp.Push(batch("s2", "n2", svc("ns/a", "2")))
	if nack := cp.Next(); nack.GetErrorDetail() == nil {
		t.Fatalf("want a NACK, got %v", nack)
	}
	healthy.Store(false)
	refresh <- struct{}{}
	r := cp.Next()
	if r.GetResponseNonce() != "n1" || r.GetAppliedVersion() != "" || r.GetErrorDetail() != nil || r.GetReport().GetDatapath().GetHealthy() {
		t.Errorf("report refresh = %v, want nonce n1, no applied version, datapath unhealthy", r)
	}
}
