package system_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// env is a running cluster scenarios share; each scenario has a namespace,
// a Service and a cluster IP of its own. replica is the control-plane
// replica whose AdminService the scenario reads.
type env struct {
	c       *system.Cluster
	replica int
	// mode is the dataplane mode the agents run, as NodeConfig chose it:
	// "iptables" (also when empty), "nftables" or "ipvs". Rows that read
	// or break the kernel's rules do it the mode's way (rulesFor,
	// driftCases, datapathBreaks).
	mode string
}

// Dataplane modes env.mode names.
const (
	modeIPTables = "iptables"
	modeNFTables = "nftables"
	modeIPVS     = "ipvs"
)

// dataplaneMode is e.mode, "iptables" when empty.
func (e *env) dataplaneMode() string {
	if e.mode == "" {
		return modeIPTables
	}
	return e.mode
}

// svc is one scenario's Service as the API server returned it (node ports
// assigned) and the EndpointSlice ports it is written with.
type svc struct {
	*corev1.Service
	ports []eps.Port
}

const svcName = "svc"

// createService creates namespace ns (if needed) and a Service "svc" in it
// with spec; ports are its EndpointSlice ports, in the order of the spec's.
// It returns once every node programmed the Service (without endpoints), so
// that a scenario's measured write starts from a programmed state.
func (e *env) createService(t *testing.T, ns string, spec corev1.ServiceSpec, ports ...eps.Port) *svc {
	t.Helper()
	ctx := t.Context()
	cs := e.c.API.Client()
	before, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	obj := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName, Labels: map[string]string{"scenario": ns}}, Spec: spec}
	created, err := cs.CoreV1().Services(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service %s/%s: %v", ns, svcName, err)
	}
	waitFor(ctx, t, "every node programmed "+ns+"/"+svcName, func() (bool, string) {
		now, err := e.nodes(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, n := range e.c.Topo.Nodes() {
			b, st := before[n.Name], now[n.Name]
			if st.GetResourceCount() <= b.GetResourceCount() || st.GetAckedVersion() != st.GetDesiredVersion() {
				return false, fmt.Sprintf("%s: %d resources (was %d), acked %q desired %q", n.Name,
					st.GetResourceCount(), b.GetResourceCount(), st.GetAckedVersion(), st.GetDesiredVersion())
			}
		}
		return true, ""
	})
	return &svc{Service: created, ports: ports}
}

// webService creates a ClusterIP Service on clusterIP, port 80 (http,
// TCP) to system.TargetPort, in namespace ns (createService), and writes
// its endpoints: pods.
func (e *env) webService(t *testing.T, ns, clusterIP string, pods ...netns.Pod) *svc {
	t.Helper()
	s := e.createService(t, ns, corev1.ServiceSpec{ClusterIP: clusterIP,
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}, eps.TCP("http", system.TargetPort))
	if err := e.write(t.Context(), s, e.endpoints(pods...)...); err != nil {
		t.Fatal(err)
	}
	return s
}

// write applies the Service's only EndpointSlice ("svc-a") with endpoints,
// stamped with the trigger-time annotation, as the controller would.
func (e *env) write(ctx context.Context, s *svc, endpoints ...eps.Endpoint) error {
	_, err := e.c.Slices.Apply(ctx, eps.Slice{Namespace: s.Namespace, Service: s.Name, Suffix: "a", Ports: s.ports, Endpoints: endpoints})
	return err
}

// vip is the Service's cluster IP and i-th port.
func (s *svc) vip(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(s.Spec.ClusterIP), uint16(s.Spec.Ports[i].Port))
}

// nodePort is node n's address and the Service's i-th node port.
func (s *svc) nodePort(n netns.Node, i int) netip.AddrPort {
	return netip.AddrPortFrom(n.IP, uint16(s.Spec.Ports[i].NodePort))
}

// endpoints is every pod as a ready endpoint.
func (e *env) endpoints(pods ...netns.Pod) []eps.Endpoint {
	out := make([]eps.Endpoint, len(pods))
	for i, p := range pods {
		out[i] = e.c.Endpoint(p)
	}
	return out
}

func (e *env) pod(i int) netns.Pod { return e.c.Topo.Pods()[i] }

// tcp makes n connections from namespace ns to addr, 8 at a time, each
// with the probe's default timeout (0.5 s: generous for a connection
// between namespaces of one machine; a slow one only delays a poll).
func (e *env) tcp(ctx context.Context, ns string, addr netip.AddrPort, n int) (probe.Result, error) {
	return probe.New(e.c.Topo, ns).TCP(ctx, addr, probe.Options{Count: n, Parallel: 8})
}

// answeredBy reports whether every attempt succeeded, only pods named in
// want answered, and each of them at least once.
func answeredBy(res probe.Result, want ...string) bool {
	if len(res.Failures) > 0 || res.Succeeded() != res.Attempts {
		return false
	}
	for name := range res.Counts {
		if !slices.Contains(want, name) {
			return false
		}
	}
	for _, name := range want {
		if res.Counts[name] == 0 {
			return false
		}
	}
	return true
}

// allFailed reports whether every attempt failed.
func allFailed(res probe.Result) bool { return res.Attempts > 0 && res.Succeeded() == 0 }

// names returns the pods' names.
func names(pods ...netns.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// change is one measured API write: reached says whether traffic shows
// it, for node (probing from it, or to its node port).
type change struct {
	scenario string
	write    func(ctx context.Context) error
	reached  func(ctx context.Context, n netns.Node) (bool, string)
	// acked says whether node's agent acknowledged the change; default: a
	// desired version other than before's, acknowledged. When set, before
	// may be nil (the control plane may be down before the write).
	acked func(before, now *switchyardv1.NodeStatus) bool
	// nodes to measure (default: all).
	nodes []netns.Node
}

func versionChanged(before, now *switchyardv1.NodeStatus) bool {
	return now.GetDesiredVersion() != before.GetDesiredVersion() && now.GetAckedVersion() == now.GetDesiredVersion()
}

// measure performs ch.write and waits, per node and concurrently, until
// traffic shows it and until the agent ACKed it; it logs one line per node:
//
//	latency scenario=<name> node=<node> to_traffic=<d> to_ack=<d> reported=<d>
//
// to_traffic and to_ack count from just before the API write; reported is
// the agent's own programming latency from the slice's trigger-time
// annotation to its kernel change, as ListNodes shows it. Nothing is
// asserted about the durations; the waits only have generous deadlines.
// It then checks the admin view (settled).
func (e *env) measure(t *testing.T, ch change) {
	t.Helper()
	ctx := t.Context()
	before, err := e.nodes(ctx)
	switch {
	case ch.acked == nil && err != nil:
		t.Fatal(err)
	case ch.acked == nil:
		ch.acked = versionChanged
	}
	t0 := time.Now()
	if err := ch.write(ctx); err != nil {
		t.Fatal(err)
	}
	nodes := ch.nodes
	if nodes == nil {
		nodes = e.c.Topo.Nodes()
	}
	toTraffic := make([]time.Duration, len(nodes))
	errs := make([]error, len(nodes)+1)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			errs[i] = poll(ctx, time.Minute, func() (bool, string) { return ch.reached(ctx, n) })
			toTraffic[i] = time.Since(t0)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("traffic of %s: %w", n.Name, errs[i])
			}
		})
	}
	acks := map[string]*switchyardv1.NodeStatus{}
	wg.Go(func() {
		errs[len(nodes)] = poll(ctx, time.Minute, func() (bool, string) {
			now, err := e.nodes(ctx)
			if err != nil {
				return false, err.Error()
			}
			for _, n := range nodes {
				if st := now[n.Name]; st != nil && acks[n.Name] == nil && ch.acked(before[n.Name], st) {
					acks[n.Name] = st
				}
			}
			return len(acks) == len(nodes), fmt.Sprintf("acked: %v of %d", slices.Sorted(maps.Keys(acks)), len(nodes))
		})
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i, n := range nodes {
		toAck, reported := "none", "none"
		if st := acks[n.Name]; st != nil {
			toAck = st.GetLastAckTime().AsTime().Sub(t0).Round(time.Millisecond).String()
			reported = st.GetLastProgrammingLatency().AsDuration().Round(time.Millisecond).String()
		}
		t.Logf("latency scenario=%s node=%s to_traffic=%v to_ack=%s reported=%s",
			ch.scenario, n.Name, toTraffic[i].Round(time.Millisecond), toAck, reported)
	}
	if t.Failed() {
		t.FailNow()
	}
	e.settled(t, ch.scenario)
}

// nodes returns ListNodes by node name.
func (e *env) nodes(ctx context.Context) (map[string]*switchyardv1.NodeStatus, error) {
	list, err := e.c.ListNodesAt(ctx, e.replica)
	if err != nil {
		return nil, err
	}
	out := map[string]*switchyardv1.NodeStatus{}
	for _, n := range list {
		out[n.GetName()] = n
	}
	return out, nil
}

// settled waits until ListNodes shows every node connected with its acked
// version equal to its desired version, and logs what it shows.
func (e *env) settled(t *testing.T, scenario string) {
	t.Helper()
	settledAt(t, e.c, e.replica, scenario)
}

func settledAt(t *testing.T, c *system.Cluster, replica int, scenario string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Check and log the very listing that was settled: a second listing
	// may already show the next version a just-written change produced.
	var list []*switchyardv1.NodeStatus
	for {
		l, err := c.ListNodesAt(ctx, replica)
		if err == nil && system.Settled(l, c.NodeNames()) {
			list = l
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("agents not settled on replica %d (last error: %v): %v", replica, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, n := range list {
		if n.GetAckedVersion() != n.GetDesiredVersion() {
			t.Errorf("admin: node %s acked %q, desired %q", n.GetName(), n.GetAckedVersion(), n.GetDesiredVersion())
		}
		t.Logf("admin scenario=%s replica=%d node=%s connected=%t desired=%s acked=%s resources=%d last_ack=%s apply=%v",
			scenario, replica, n.GetName(), n.GetConnected(), short(n.GetDesiredVersion()), short(n.GetAckedVersion()),
			n.GetResourceCount(), n.GetLastAckTime().AsTime().Format("15:04:05.000"),
			n.GetLastApplyDuration().AsDuration().Round(time.Millisecond))
	}
}

func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// rulesFor returns node n's nat and filter rules (iptables-save, or the
// nftables mode's table) that mention namespace ns, as the iptables
// mode's comments ("ns/name:port") and the nftables mode's chain names
// ("ns/name/proto/port") do.
func (e *env) rulesFor(ctx context.Context, n netns.Node, ns string) ([]string, error) {
	argv := []string{"iptables-save"}
	if e.mode == modeNFTables {
		argv = []string{"nft", "list", "table", "ip", "switchyard"}
	}
	out, err := e.c.Topo.Exec(ctx, n.NS, argv...)
	if err != nil {
		return nil, err
	}
	var rules []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(line, ns+"/") {
			rules = append(rules, line)
		}
	}
	return rules, nil
}
