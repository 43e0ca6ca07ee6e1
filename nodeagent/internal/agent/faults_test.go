package agent

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The agent's side of "faults on purpose": the node's kernel (the Fake)
// sits behind dataplanetest.Faulty, and each test checks what a
// kube-proxy user expects of a node whose kernel misbehaves.

// errHalfWay is what a kernel says when a commit stops half-way.
var errHalfWay = errors.New("ipvs: add real server 10.244.0.5:80: file exists")

// samples returns the values of the metric called name, keyed by their
// label values joined with ","; "" for a metric without labels.
func (n *node) samples(name string) map[string]float64 {
	n.t.Helper()
	mfs, err := n.a.metrics.Registry().Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[strings.Join(labels, ",")] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

func expectNack(t *testing.T, cp *cptest.Server, nonce, detail string) {
	t.Helper()
	r := cp.Next()
	if r.GetResponseNonce() != nonce || r.GetAppliedVersion() != "" || !strings.Contains(r.GetErrorDetail().GetMessage(), detail) {
		t.Fatalf("want NACK of %s saying %q, got %v", nonce, detail, r)
	}
}

// kernelHolds fails the test unless the Fake holds exactly rs.
func (n *node) kernelHolds(rs ...*switchyardv1.Resource) {
	n.t.Helper()
	want := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{}}
	for _, r := range rs {
		want.Services[r.GetName()] = r.GetService()
	}
	if diff := cmp.Diff(want, n.dp.Applied(), protocmp.Transform()); diff != "" {
		n.t.Errorf("kernel (-want +got):\n%s", diff)
	}
}

// persisted fails the test unless a restart from dir restores the view
// of version with exactly versions: the saved view plus the resources of
// a batch that may have reached the kernel.
func persisted(t *testing.T, dir, version string, versions map[string]string) {
	t.Helper()
	store, err := persist.New(dir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Load()
	if err != nil || !r.Found() {
		t.Fatalf("Load = %+v, %v", r, err)
	}
	if got := r.Merged(); got.SystemVersion != version || !cmp.Equal(versions, got.Versions()) {
		t.Errorf("a restart restores %s %v, want %s %v", got.SystemVersion, got.Versions(), version, versions)
	}
}

// TestHalfWayApplyIsNackedAndRepaired: a commit that got half-way is
// NACKed with the kernel's error, never ACKed; sync_errors and nacks
// count it while the last-sync time and the applied version stay; the
// state dir never restores the failed version. The control plane's next
// view (which carries the rejected names again) is applied in full, and
// the kernel then holds exactly that view.
func TestHalfWayApplyIsNackedAndRepaired(t *testing.T) {
	cp := cptest.New(t)
	dir := t.TempDir()
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, clock: clocktesting.NewFakeClock(time.Now())})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"), svc("ns/b", "1"))
	expectAck(t, cp, "n1", "s1")
	lastSync := n.samples("kubeproxy_sync_proxy_rules_last_timestamp_seconds")[""]

	n.faults.SetPlan(dataplanetest.Script(dataplanetest.Fault{Kind: dataplanetest.Partial, Err: errHalfWay}))
	push(cp, "s2", "n2", []string{"ns/a"}, svc("ns/b", "2"), svc("ns/c", "1"))
	expectNack(t, cp, "n2", errHalfWay.Error())
	// Of the three changes (a removed, b changed, c added) one reached
	// the kernel: ns/a is gone although the agent still has it applied.
	n.kernelHolds(svc("ns/b", "1"))
	for name, want := range map[string]map[string]float64{
		"switchyard_agent_sync_errors_total":                {"": 1},
		"switchyard_agent_nacks_total":                      {"": 1},
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds": {"": lastSync},
		"switchyard_agent_applied_version":                  {"s1": 1},
	} {
		if diff := cmp.Diff(want, n.samples(name)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	// What the kernel may hold of s2 is on record, under s1's version.
	persisted(t, dir, "s1", map[string]string{"ns/a": "1", "ns/b": "2", "ns/c": "1"})

	push(cp, "s3", "n3", []string{"ns/a"}, svc("ns/b", "2"), svc("ns/c", "1"), svc("ns/d", "1"))
	expectAck(t, cp, "n3", "s3")
	calls := n.dp.Calls()
	if last := calls[len(calls)-1]; !last.Opts.Full {
		t.Errorf("the apply after the half-way one = %+v, want a full one", last.Opts)
	}
	n.kernelHolds(svc("ns/b", "2"), svc("ns/c", "1"), svc("ns/d", "1"))
	persisted(t, dir, "s3", map[string]string{"ns/b": "2", "ns/c": "1", "ns/d": "1"})
	cp.NoRequest()
}

// TestResyncRepairsAHalfWayApply: when the control plane holds the
// rejected view (it resends only once the view changes), the periodic
// full resync puts the kernel back at the last good view, and the state
// dir says so: a restart announces the versions the kernel holds, not
// the rejected ones.
func TestResyncRepairsAHalfWayApply(t *testing.T) {
	cp := cptest.New(t)
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Now())
	first := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, clock: clk})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"), svc("ns/b", "1"))
	expectAck(t, cp, "n1", "s1")
	first.faults.SetPlan(dataplanetest.Script(dataplanetest.Fault{Kind: dataplanetest.Partial, Err: errHalfWay}))
	push(cp, "s2", "n2", []string{"ns/a"}, svc("ns/b", "2"), svc("ns/c", "1"))
	expectNack(t, cp, "n2", errHalfWay.Error())
	first.kernelHolds(svc("ns/b", "1"))

	n := len(first.dp.Calls())
	clk.Step(10 * time.Second) // the sync period
	runtest.Eventually(t, "full resync", func() bool { return len(first.dp.Calls()) > n })
	first.kernelHolds(svc("ns/a", "1"), svc("ns/b", "1"))
	if c := first.dp.Calls()[n]; !c.Opts.Full {
		t.Errorf("resync = %+v, want full", c.Opts)
	}
	first.stop()
	persisted(t, dir, "s1", map[string]string{"ns/a": "1", "ns/b": "1"})

	second := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, clock: clk})
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, cp.Next().GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions after the restart (-want +got):\n%s", diff)
	}
	second.kernelHolds(svc("ns/a", "1"), svc("ns/b", "1"))
}

// TestSlowApplyLosesNoUpdate: responses that arrive while a commit is
// stuck wait for it: nothing is answered meanwhile, then each is ACKed
// in order and the kernel ends at the newest view. (The control plane
// keeps one response in flight and coalesces the rest; the syncer
// coalesces concurrent callers, see its tests.)
func TestSlowApplyLosesNoUpdate(t *testing.T) {
	cp := cptest.New(t)
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: t.TempDir(), clock: clocktesting.NewFakeClock(time.Now())})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"))
	expectAck(t, cp, "n1", "s1")
	release := make(chan struct{})
	n.faults.SetPlan(dataplanetest.Script(dataplanetest.Fault{Kind: dataplanetest.Slow, Release: release}))
	push(cp, "s2", "n2", nil, svc("ns/b", "1"))
	runtest.Eventually(t, "the slow commit", func() bool { return n.faults.Waiting() == 1 })
	push(cp, "s3", "n3", nil, svc("ns/a", "2"))
	push(cp, "s4", "n4", []string{"ns/b"}, svc("ns/c", "1"))
	cp.NoRequest()
	close(release)
	expectAck(t, cp, "n2", "s2")
	expectAck(t, cp, "n3", "s3")
	expectAck(t, cp, "n4", "s4")
	n.kernelHolds(svc("ns/a", "2"), svc("ns/c", "1"))
}

// TestShutdownDuringASlowApply: SIGTERM ends a stuck commit at once;
// it is neither ACKed nor NACKed (the stream is gone), nothing is
// flushed, and the state dir restores the last good version.
func TestShutdownDuringASlowApply(t *testing.T) {
	cp := cptest.New(t)
	dir := t.TempDir()
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, clock: clocktesting.NewFakeClock(time.Now())})
	cp.Next()
	push(cp, "s1", "n1", nil, svc("ns/a", "1"))
	expectAck(t, cp, "n1", "s1")
	n.faults.SetPlan(dataplanetest.Script(dataplanetest.Fault{Kind: dataplanetest.Slow, Release: make(chan struct{})}))
	push(cp, "s2", "n2", nil, svc("ns/a", "2"))
	runtest.Eventually(t, "the slow commit", func() bool { return n.faults.Waiting() == 1 })
	stopped := make(chan struct{})
	go func() { n.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(cptest.Timeout):
		t.Fatal("the agent did not stop while a commit was stuck")
	}
	if in := n.faults.Injections(); len(in) != 1 || !in[0].Canceled {
		t.Errorf("injections = %+v, want the slow commit canceled", in)
	}
	cp.NoRequest()
	n.kernelHolds(svc("ns/a", "1"))
	if n.dp.Cleanups() != 0 {
		t.Errorf("Cleanups = %d, want 0", n.dp.Cleanups())
	}
	// The canceled commit may have reached a real kernel: its resources
	// are restored, under the last good version.
	persisted(t, dir, "s1", map[string]string{"ns/a": "2"})
}
