package system_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Kinds of API change.
const (
	changeScale  = "scale"          // the echo Service (the stream's) to another set of pods
	changeAdd    = "add-service"    // a new Service with its EndpointSlice
	changeRemove = "remove-service" // one of those deleted
)

const (
	soakNamespace = "soak" // the added Services live here
	maxExtra      = 5      // added Services alive at once
	writeTimeout  = 10 * time.Second
)

// changeGap is the pause between one change's convergence and the next
// write: changes are serial, so each convergence time is its own.
var changeGap = [2]time.Duration{2 * time.Second, 6 * time.Second}

// changeRecord is one API change and how long each node took to show it.
type changeRecord struct {
	Seq     int        `json:"seq"`
	Kind    string     `json:"kind"`
	Service string     `json:"service"`
	Want    []string   `json:"want"` // pods that must answer; empty: the Service is gone
	At      msDuration `json:"atMs"` // the write began, since the soak started
	Error   string     `json:"error,omitempty"`
	// Nodes: per node, write → its ACK shows the change (the control
	// plane's ack time) and write → its traffic shows it (first probe that
	// did); ToAck and ToTraffic are the slowest node's.
	Nodes     []nodeConvergence `json:"nodes,omitempty"`
	ToAck     msDuration        `json:"toAckMs"`
	ToTraffic msDuration        `json:"toTrafficMs"`
	Converged bool              `json:"converged"`
}

type nodeConvergence struct {
	Node      string     `json:"node"`
	ToAck     msDuration `json:"toAckMs"`
	ToTraffic msDuration `json:"toTrafficMs"`
	Acked     bool       `json:"acked"`
	Reached   bool       `json:"reached"`
	// Probes are the last traffic probes, oldest first: when each began
	// and what it saw; the last one showed the change, if Reached.
	Probes []string `json:"probes,omitempty"`
}

// keptProbes is how many probes a node's convergence keeps.
const keptProbes = 4

// took is the change's convergence: both signals on every node.
func (r changeRecord) took() time.Duration { return time.Duration(max(r.ToAck, r.ToTraffic)) }

// apiChange is one planned write and what every node must show after it.
type apiChange struct {
	kind      string
	ns, name  string
	vip       netip.AddrPort
	want      []netns.Pod // nil: the Service is gone
	write     func(ctx context.Context) error
	committed func() // the write succeeded: update the plan's state
}

// extraService is one added Service that is still there.
type extraService struct {
	name string
	vip  netip.AddrPort
}

// changer draws the changes; only its loop touches it.
type changer struct {
	s      *soak
	rng    *rand.Rand
	scaled uint // bit i: pod i serves the echo Service (0: every pod, as Start made it)
	extra  []extraService
	added  int
}

func (s *soak) createSoakNamespace(ctx context.Context) error {
	_, err := s.c.API.Client().CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: soakNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", soakNamespace, err)
	}
	return nil
}

// loop makes one change at a time until ctx ends, each measured to
// convergence (which outlives ctx, bounded by convergeBound).
func (ch *changer) loop(ctx context.Context) {
	for sleepCtx(ctx, uniform(ch.rng, changeGap)) {
		rec := ch.s.converge(ctx, ch.next())
		ch.s.mu.Lock()
		rec.Seq = len(ch.s.changes) + 1
		ch.s.changes = append(ch.s.changes, rec)
		ch.s.mu.Unlock()
	}
}

// next draws a change: half of them rescale the echo Service, the rest add
// a Service (while fewer than maxExtra) or remove one.
func (ch *changer) next() apiChange {
	r := ch.rng.Float64()
	switch {
	case r < 0.5:
		return ch.scale()
	case len(ch.extra) == 0 || (len(ch.extra) < maxExtra && r < 0.75):
		return ch.add()
	default:
		return ch.remove(ch.rng.IntN(len(ch.extra)))
	}
}

// pods returns the pods whose bits mask sets.
func (ch *changer) pods(mask uint) []netns.Pod {
	var out []netns.Pod
	for i, p := range ch.s.c.Topo.Pods() {
		if mask&(1<<i) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// subset draws a non-empty set of pods other than not.
func (ch *changer) subset(not uint) uint {
	all := uint(1)<<len(ch.s.c.Topo.Pods()) - 1
	for {
		if m := 1 + uint(ch.rng.IntN(int(all))); m != not {
			return m
		}
	}
}

func (ch *changer) scale() apiChange {
	cur := ch.scaled
	if cur == 0 {
		cur = uint(1)<<len(ch.s.c.Topo.Pods()) - 1
	}
	mask := ch.subset(cur)
	pods := ch.pods(mask)
	return apiChange{kind: changeScale, ns: system.Namespace, name: system.ServiceName, vip: ch.s.c.VIP(), want: pods,
		write: func(ctx context.Context) error { return ch.s.c.ScaleTo(ctx, pods) },
		committed: func() {
			ch.scaled = mask
			ch.s.mu.Lock()
			ch.s.scaled = names(pods...)
			ch.s.mu.Unlock()
		}}
}

func (ch *changer) add() apiChange {
	ch.added++
	name := fmt.Sprintf("s-%d", ch.added)
	// 10.96.3.0/24 is no other test's; names never repeat and at most
	// maxExtra live at once, so addresses do not collide.
	vip := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, 3, byte(1 + ch.added%250)}), 80)
	pods := ch.pods(ch.subset(0))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: soakNamespace, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: vip.Addr().String(), Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: int32(vip.Port()),
		}}}}
	return apiChange{kind: changeAdd, ns: soakNamespace, name: name, vip: vip, want: pods,
		write: func(ctx context.Context) error {
			if _, err := ch.s.c.API.Client().CoreV1().Services(soakNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create service %s: %w", name, err)
			}
			_, err := ch.s.c.Slices.Apply(ctx, eps.Slice{Namespace: soakNamespace, Service: name, Suffix: "a",
				Ports: []eps.Port{eps.TCP("http", system.TargetPort)}, Endpoints: ch.s.e.endpoints(pods...)})
			return err
		},
		committed: func() { ch.extra = append(ch.extra, extraService{name: name, vip: vip}) }}
}

func (ch *changer) remove(i int) apiChange {
	x := ch.extra[i]
	// The Service goes from the plan even if a write fails: a half-removed
	// Service is no one's to converge on.
	ch.extra = slices.Delete(ch.extra, i, i+1)
	return apiChange{kind: changeRemove, ns: soakNamespace, name: x.name, vip: x.vip,
		write: func(ctx context.Context) error {
			if err := ch.s.c.API.Client().CoreV1().Services(soakNamespace).Delete(ctx, x.name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("delete service %s: %w", x.name, err)
			}
			return ch.s.c.Slices.Delete(ctx, soakNamespace, x.name, "a")
		},
		committed: func() {}}
}

// converge writes ch (while kube-apiserver is up) and waits, per node and
// concurrently, until its traffic and its ACK show the change.
func (s *soak) converge(ctx context.Context, ch apiChange) changeRecord {
	rec := changeRecord{Kind: ch.kind, Service: ch.ns + "/" + ch.name, Want: names(ch.want...)}
	s.apiGate.RLock()
	t0 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	err := ch.write(wctx)
	cancel()
	s.apiGate.RUnlock()
	rec.At = msDuration(s.since(t0))
	if err != nil {
		// The API server is the test bed's, not Switchyard: reported, not
		// an invariant.
		rec.Error = err.Error()
		s.log.Warn("soak: API write failed", "change", ch.kind, "service", rec.Service, "err", err)
		return rec
	}
	ch.committed()

	life := context.WithoutCancel(ctx)
	nodes := s.c.Topo.Nodes()
	toTraffic, reached, probes := make([]time.Duration, len(nodes)), make([]bool, len(nodes)), make([][]string, len(nodes))
	acked := map[string]time.Time{}
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			var began time.Time // of the latest probe: the one that showed it, once done
			err := pollEvery(life, convergeBound, 50*time.Millisecond, func() (bool, string) {
				began = time.Now()
				ok, seen := s.trafficShows(life, n, ch)
				probes[i] = append(probes[i], fmt.Sprintf("+%v %s", began.Sub(t0).Round(time.Millisecond), seen))
				if len(probes[i]) > keptProbes {
					probes[i] = probes[i][1:]
				}
				return ok, seen
			})
			toTraffic[i], reached[i] = began.Sub(t0), err == nil
		})
	}
	wg.Go(func() {
		_ = pollEvery(life, convergeBound, 50*time.Millisecond, func() (bool, string) {
			return s.acksShow(life, ch, t0, acked)
		})
	})
	wg.Wait()
	for i, n := range nodes {
		at, ok := acked[n.Name]
		toAck := convergeBound // not acked: the bound, so that it shows as the slowest
		if ok {
			toAck = at.Sub(t0)
		}
		rec.Nodes = append(rec.Nodes, nodeConvergence{Node: n.Name, ToAck: msDuration(toAck), Acked: ok,
			ToTraffic: msDuration(toTraffic[i]), Reached: reached[i], Probes: probes[i]})
	}

	rec.Converged = true
	var late []string
	for _, n := range rec.Nodes {
		rec.ToAck, rec.ToTraffic = max(rec.ToAck, n.ToAck), max(rec.ToTraffic, n.ToTraffic)
		if !n.Acked || !n.Reached {
			rec.Converged = false
			late = append(late, fmt.Sprintf("%s (acked %t, traffic %t)", n.Node, n.Acked, n.Reached))
		}
	}
	if !rec.Converged {
		s.violate("%s %s written at %v did not reach %v within %v", ch.kind, rec.Service, time.Duration(rec.At), late, convergeBound)
	}
	s.log.Info("soak: change", "kind", ch.kind, "service", rec.Service, "want", rec.Want, "at", time.Duration(rec.At),
		"toAck", time.Duration(rec.ToAck).Round(time.Millisecond), "toTraffic", time.Duration(rec.ToTraffic).Round(time.Millisecond))
	return rec
}

// probeTimeout bounds each connection of a convergence probe. A VIP not
// programmed yet (or no more) does not answer, so a probe costs its
// timeout; short, so that it blurs the measurement little. Between
// namespaces of one machine a connection takes well under a millisecond;
// one slow under load only fails a probe, and the next one counts.
const probeTimeout = 150 * time.Millisecond

// trafficShows says whether connections from node n show ch: answered by
// exactly its pods, or, for a removed Service, by none. Convergence counts
// until the probe that showed it began, so its own timeouts do not count.
func (s *soak) trafficShows(ctx context.Context, n netns.Node, ch apiChange) (bool, string) {
	count := 24 // enough that each of four pods answers one
	if ch.want == nil {
		count = 8
	}
	// All at once: a probe that fails costs one timeout, not one a batch.
	res, err := probe.New(s.c.Topo, n.NS).TCP(ctx, ch.vip, probe.Options{Count: count, Parallel: count, Timeout: probeTimeout})
	if ch.want == nil {
		return err == nil && allFailed(res), fmt.Sprint(res, err)
	}
	return err == nil && answeredBy(res, names(ch.want...)...), fmt.Sprint(res, err)
}

// acksShow fills acked with the nodes whose acknowledged view shows ch, as
// the replica each is connected to says: the Service at its version there
// with exactly ch's endpoints, or, for a removed one, absent from a view
// the node acked. The node's ack time is its replica's last_ack_time, read
// after GetService (so it is the ack that showed the change, or a later
// one); before t0 it cannot be, so then the observation time is used.
func (s *soak) acksShow(ctx context.Context, ch apiChange, t0 time.Time, acked map[string]time.Time) (bool, string) {
	before := s.fleet(ctx)
	views := map[int][]*switchyardv1.ServiceNodeStatus{}
	for _, p := range before {
		if _, ok := views[p.replica]; ok {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		st, err := s.c.GetServiceAt(rctx, p.replica, ch.ns, ch.name)
		cancel()
		if err != nil && status.Code(err) != codes.NotFound {
			continue
		}
		views[p.replica] = st
	}
	after := s.fleet(ctx)
	now := time.Now()
	var missing []string
	for _, name := range s.c.NodeNames() {
		if _, ok := acked[name]; ok {
			continue
		}
		p, ok := before[name]
		q, same := after[name]
		st, asked := views[p.replica]
		if !ok || !same || q.replica != p.replica || !asked || !showsChange(st, name, ch, q.st) {
			missing = append(missing, name)
			continue
		}
		at := q.st.GetLastAckTime().AsTime()
		if at.Before(t0) {
			at = now
		}
		acked[name] = at
	}
	return len(missing) == 0, fmt.Sprintf("not acked yet: %v", missing)
}

// showsChange says whether node's entry in a GetService answer (views)
// and its status afterwards (st) show ch acknowledged.
func showsChange(views []*switchyardv1.ServiceNodeStatus, node string, ch apiChange, st *switchyardv1.NodeStatus) bool {
	i := slices.IndexFunc(views, func(v *switchyardv1.ServiceNodeStatus) bool { return v.GetNodeName() == node })
	if ch.want == nil {
		// Absent from the node's desired view, then a listing taken later
		// shows desired acked: that acked view has no such Service.
		return i < 0 && st.GetDesiredVersion() != "" && st.GetAckedVersion() == st.GetDesiredVersion()
	}
	if i < 0 || !views[i].GetAcked() {
		return false
	}
	var got []string
	for _, e := range views[i].GetView().GetClusterEndpoints() {
		got = append(got, e.GetAddress())
	}
	want := make([]string, len(ch.want))
	for j, p := range ch.want {
		want[j] = p.IP.String()
	}
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
