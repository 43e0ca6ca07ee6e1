package agent

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/healthcheck/healthchecktest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is one running agent with its fake dataplane.
type node struct {
	t  *testing.T
	a  *Agent
	dp *dataplanetest.Fake
	// faults stands between the agent and dp; it passes every call
	// until a test sets a plan.
	faults *dataplanetest.Faulty
	// stop is SIGTERM: the stream closes, the rules stay.
	stop func()
	// hc is where the health check node ports listen.
	hc healthchecktest.Ports
}

type nodeOpts struct {
	addrs    []string
	stateDir string
	clock    clock.Clock
	// log, when set, also receives the agent's log.
	log io.Writer
	// options, when set, changes the agent's options.
	options func(*Options)
}

func startNode(t *testing.T, no nodeOpts) *node {
	t.Helper()
	n := &node{t: t, dp: dataplanetest.New("dry-run")}
	var faultOpts []dataplanetest.FaultyOption
	if no.clock != nil {
		faultOpts = append(faultOpts, dataplanetest.WithAfter(no.clock.After))
	}
	n.faults = dataplanetest.NewFaulty(n.dp, nil, faultOpts...)
	var logTo io.Writer = t.Output()
	if no.log != nil {
		logTo = io.MultiWriter(logTo, no.log)
	}
	o := Options{
		NodeName:      "node-a",
		AgentVersion:  "test",
		ControlPlanes: no.addrs,
		DialOptions:   []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())},
		Mode:          switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN,
		NewDataplane: func(mode switchyardv1.DataplaneMode) (dataplane.Dataplane, error) {
			if mode != switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN {
				return nil, errors.New("not in this test")
			}
			return n.faults, nil
		},
		StateDir:          no.stateDir,
		HealthzAddr:       "127.0.0.1:0",
		MetricsAddr:       "127.0.0.1:0",
		HealthCheckListen: n.hc.Listen,
		SyncPeriod:        10 * time.Second,
		Backoff:           discovery.Backoff{Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond},
		Clock:             no.clock,
		Logger:            slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if no.options != nil {
		no.options(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	n.a = a
	n.stop = runtest.Start(t, a.Run)
	return n
}

func svc(name, version string) *switchyardv1.Resource {
	ns, nm, _ := strings.Cut(name, "/")
	return &switchyardv1.Resource{Name: name, Version: version, Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
		Namespace: ns, Name: nm, ClusterIps: []string{"10.96.0." + version},
	}}}
}

func push(cp *cptest.Server, sysver, nonce string, removed []string, rs ...*switchyardv1.Resource) {
	cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: sysver, Nonce: nonce, Resources: rs, RemovedResources: removed})
}

func expectAck(t *testing.T, cp *cptest.Server, nonce, version string) {
	t.Helper()
	r := cp.Next()
	if r.GetResponseNonce() != nonce || r.GetAppliedVersion() != version || r.GetErrorDetail() != nil {
		t.Fatalf("want ACK of %s at %s, got %v", nonce, version, r)
	}
}

func TestAckAfterApplyNackKeepsState(t *testing.T) {
	cp := cptest.New(t)
	dir := t.TempDir()
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"))
	expectAck(t, cp, "n1", "s1")
	// ACK only after the apply: the dataplane and the state dir have it.
	if diff := cmp.Diff([]string{"ns/a"}, n.dp.Services()); diff != "" {
		t.Errorf("dataplane (-want +got):\n%s", diff)
	}
	store, err := persist.New(dir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := store.Load(); err != nil || !r.Found() || r.View.SystemVersion != "s1" {
		t.Errorf("persisted = %v, %v; want s1", r.View, err)
	}

	n.dp.SetHook(func(string, *dataplane.State, dataplane.ApplyOptions) error { return errors.New("injected") })
	push(cp, "s2", "n2", []string{"ns/a"}, svc("ns/b", "1"))
	nack := cp.Next()
	if nack.GetResponseNonce() != "n2" || nack.GetErrorDetail() == nil || nack.GetAppliedVersion() != "" {
		t.Fatalf("want NACK of n2, got %v", nack)
	}
	if !strings.Contains(nack.GetErrorDetail().GetMessage(), "injected") {
		t.Errorf("error_detail = %v", nack.GetErrorDetail())
	}
	if diff := cmp.Diff([]string{"ns/a"}, n.dp.Services()); diff != "" {
		t.Errorf("dataplane after NACK (-want +got):\n%s", diff)
	}
	if r, err := store.Load(); err != nil || !r.Found() || r.View.SystemVersion != "s1" || r.Pending == nil {
		t.Errorf("persisted after NACK = %+v, %v; want s1 and the NACKed update pending (the kernel may hold part of it)", r, err)
	}
	// The last good state is what a reconnect announces.
	n.dp.SetHook(nil)
	cp.EndStream(errors.New("bye"))
	again := cp.Next()
	if diff := cmp.Diff(map[string]string{"ns/a": "1"}, again.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
}

func TestRestartRestoresWithoutFlush(t *testing.T) {
	cp := cptest.New(t)
	dir := t.TempDir()
	first := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"), svc("ns/b", "1"))
	expectAck(t, cp, "n1", "s1")
	first.stop()
	if first.dp.Cleanups() != 0 {
		t.Errorf("shutdown cleaned up the dataplane")
	}

	// The restarted agent comes up while the control plane is away: it
	// reconciles the restored view with a full apply and never flushes.
	cp.Stop()
	second := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir})
	runtest.Eventually(t, "reconcile", func() bool { return len(second.dp.Calls()) > 0 })
	calls := second.dp.Calls()
	if calls[0].Op != "apply" || !calls[0].Opts.Full {
		t.Errorf("first call = %+v, want a full apply", calls[0])
	}
	if diff := cmp.Diff([]string{"ns/a", "ns/b"}, second.dp.Services()); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}

	cp.Restart()
	again := cp.Next()
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, again.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
	push(cp, "s2", "n2", []string{"ns/a"}, svc("ns/c", "1"))
	expectAck(t, cp, "n2", "s2")
	if diff := cmp.Diff([]string{"ns/b", "ns/c"}, second.dp.Services()); diff != "" {
		t.Errorf("after diff (-want +got):\n%s", diff)
	}
	if second.dp.Cleanups() != 0 {
		t.Errorf("Cleanups = %d, want 0", second.dp.Cleanups())
	}
}

func TestFailoverToSecondAddress(t *testing.T) {
	primary, secondary := cptest.New(t), cptest.New(t)
	n := startNode(t, nodeOpts{addrs: []string{primary.Addr(), secondary.Addr()}, stateDir: t.TempDir()})
	primary.Next()
	push(primary, "s1", "n1", nil, svc("ns/a", "1"))
	expectAck(t, primary, "n1", "s1")
	primary.Stop()
	r := secondary.Next()
	if diff := cmp.Diff(map[string]string{"ns/a": "1"}, r.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions on the second address (-want +got):\n%s", diff)
	}
	push(secondary, "s2", "n2", nil, svc("ns/b", "1"))
	expectAck(t, secondary, "n2", "s2")
	if diff := cmp.Diff([]string{"ns/a", "ns/b"}, n.dp.Services()); diff != "" {
		t.Errorf("dataplane (-want +got):\n%s", diff)
	}
}

func TestControlPlaneGoneRulesUntouched(t *testing.T) {
	cp := cptest.New(t)
	clk := clocktesting.NewFakeClock(time.Now())
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: t.TempDir(), clock: clk})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"), svc("ns/b", "1"))
	expectAck(t, cp, "n1", "s1")
	before := n.dp.Dump()
	cp.Stop()

	// 30 s of fake time without a control plane: backoff timers and
	// periodic resyncs fire, the rules stay as they were.
	for elapsed := time.Duration(0); elapsed < 30*time.Second; elapsed += 100 * time.Millisecond {
		runtest.Eventually(t, "agent waiting on its timers", func() bool { return clk.Waiters() >= 2 })
		clk.Step(100 * time.Millisecond)
	}
	if got := n.dp.Dump(); got != before {
		t.Errorf("rules changed while the control plane was gone:\nbefore:\n%s\nafter:\n%s", before, got)
	}
	if n.dp.Cleanups() != 0 {
		t.Errorf("Cleanups = %d, want 0", n.dp.Cleanups())
	}
	for _, c := range n.dp.Calls() {
		if c.Err != nil || len(c.State.Services) != 2 {
			t.Errorf("unexpected call while away: %+v", c)
		}
	}

	cp.Restart()
	runtest.Eventually(t, "reconnect", func() bool {
		if cp.Streams() == 2 {
			return true
		}
		if clk.Waiters() >= 2 {
			clk.Step(100 * time.Millisecond)
		}
		return false
	})
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, cp.Next().GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
	push(cp, "s2", "n2", nil, svc("ns/b", "2"))
	// The sync may wait for the min sync period on the fake clock.
	expectAck(t, cp, "n2", "s2")
	if !strings.Contains(n.dp.Dump(), "ns/b ips=10.96.0.2") {
		t.Errorf("not converged:\n%s", n.dp.Dump())
	}
}

func lbLocal(version string, local int) *switchyardv1.Resource {
	r := svc("ns/lb", version)
	sv := r.GetService()
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	sv.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	sv.HealthCheckNodePort = 32000
	for range local {
		sv.LocalEndpoints = append(sv.LocalEndpoints, &switchyardv1.Endpoint{Address: "10.244.0.9", Ready: true, IsLocal: true})
	}
	return r
}

func TestHTTPEndpoints(t *testing.T) {
	cp := cptest.New(t)
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: t.TempDir()})
	cp.Next()
	push(cp, "s1", "n1", nil, lbLocal("1", 1))
	expectAck(t, cp, "n1", "s1")

	code, body := healthchecktest.Get(t, "http://"+n.hc.Addr(32000)+"/")
	if code != http.StatusOK || !strings.Contains(body, `"localEndpoints":1`) {
		t.Errorf("health-check port with a local endpoint: %d %s", code, body)
	}
	push(cp, "s2", "n2", nil, lbLocal("2", 0))
	expectAck(t, cp, "n2", "s2")
	if code, body := healthchecktest.Get(t, "http://"+n.hc.Addr(32000)+"/"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"localEndpoints":0`) {
		t.Errorf("health-check port without local endpoints: %d %s", code, body)
	}
	hc := n.hc.Addr(32000)
	push(cp, "s3", "n3", []string{"ns/lb"})
	expectAck(t, cp, "n3", "s3")
	if c, err := net.Dial("tcp", hc); err == nil {
		c.Close()
		t.Errorf("health-check server of a removed service still listens")
	}

	for _, path := range []string{"/healthz", "/livez"} {
		code, body := healthchecktest.Get(t, "http://"+n.a.HealthzAddr()+path)
		var st struct {
			LastUpdated, CurrentTime, NodeName string
			NodeHealthy                        bool
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("%s: %q: %v", path, body, err)
		}
		if code != http.StatusOK || !st.NodeHealthy || st.NodeName != "node-a" || st.LastUpdated == "" {
			t.Errorf("%s = %d %s", path, code, body)
		}
	}
	_, metrics := healthchecktest.Get(t, "http://"+n.a.MetricsAddr()+"/metrics")
	for _, want := range []string{`switchyard_agent_applied_version{version="s3"} 1`, "kubeproxy_sync_proxy_rules_duration_seconds_count",
		`switchyard_agent_control_plane_connected{address="` + cp.Addr() + `"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
