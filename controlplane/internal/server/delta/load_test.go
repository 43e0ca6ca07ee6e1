package delta_test

import (
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// bigService is a service view of about 300 encoded bytes.
func bigService(t *testing.T, i int, gen uint32) *cache.View {
	r := cachetest.Service("ns", fmt.Sprintf("svc-%03d", i), fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), 1000+gen)
	for e := range 6 {
		r.GetService().ClusterEndpoints = append(r.GetService().ClusterEndpoints, &switchyardv1.Endpoint{
			Address:  fmt.Sprintf("10.%d.%d.%d", e, i/250, i%250+1),
			Ports:    []*switchyardv1.EndpointPort{{Port: 8080}},
			Ready:    true,
			Serving:  true,
			NodeName: fmt.Sprintf("node-%d", e),
		})
	}
	return cachetest.MustView(t, r)
}

// agent is a scripted agent that ACKs everything and records the newest
// complete version it applied.
type agent struct {
	mu        sync.Mutex
	version   string
	responses int
}

// agent opens a stream as node and answers every response with an ACK until
// the test ends.
func (h *harness) agent(t *testing.T, node string) *agent {
	cl := h.open(t, node, nil, true)
	a := &agent{}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		for {
			select {
			case <-t.Context().Done():
				return
			case <-cl.Done():
				return
			case r := <-cl.Responses():
				a.mu.Lock()
				a.responses++
				if v := r.GetSystemVersion(); v != "" {
					a.version = v
				}
				a.mu.Unlock()
				req := &switchyardv1.DeltaSnapshotsRequest{ResponseNonce: r.GetNonce(), AppliedVersion: r.GetSystemVersion()}
				if err := cl.Stream().Send(req); err != nil {
					return
				}
			}
		}
	})
	return a
}

func responses(agents []*agent) []int {
	var out []int
	for _, a := range agents {
		a.mu.Lock()
		out = append(out, a.responses)
		a.mu.Unlock()
	}
	return out
}

func (a *agent) at(version string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.version == version
}

// TestStuckReaderStaysBounded: one agent never reads its stream. The others
// keep receiving every update promptly, publishing never blocks, and the
// server keeps at most one response and a bounded dirty set for the stuck
// node, so its heap does not grow with the number of changes.
func TestStuckReaderStaysBounded(t *testing.T) {
	const (
		services   = 500
		fastAgents = 3
		publishes  = 1000
		perPublish = 20
	)
	gens := generations(t, 3, services)
	nv := cachetest.NewNodeView(gens[0]...)
	c := cache.New()
	c.Publish("stuck", nv, nil)
	h := start(t, c, stream.Options{
		CoalesceWindow: 10 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	})

	// A small flow-control window: most of the ~150 KB first response
	// stays in the server's transport buffers, and the agent never reads
	// nor answers it, so it is the one response in flight for good.
	stuckConn := servertest.Dial(t, h.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	h.openOn(t, stuckConn, "stuck", nil, false)
	servertest.Eventually(t, "stuck stream has a response in flight", func() bool { return h.status("stuck").Pending.InFlight == 1 })
	nodes := []string{"stuck"}
	agents := make([]*agent, fastAgents)
	for i := range agents {
		node := fmt.Sprintf("fast-%d", i)
		nodes = append(nodes, node)
		c.Publish(node, nv, nil)
		agents[i] = h.agent(t, node)
	}
	for _, a := range agents {
		servertest.Eventually(t, "fast agents in sync", func() bool { return a.at(nv.Version()) })
	}

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	begin := time.Now()
	for i := range publishes {
		var names []string
		nv, names = churn(nv, gens, i*perPublish, perPublish)
		for _, node := range nodes {
			c.Publish(node, nv, names)
		}
		if i%100 == 0 {
			checkBounded(t, h.status("stuck"), nv)
		}
	}
	publishing := time.Since(begin)
	last := time.Now()
	for _, a := range agents {
		servertest.Eventually(t, "fast agents reach the newest version", func() bool { return a.at(nv.Version()) })
	}
	catchUp := time.Since(last)
	checkBounded(t, h.status("stuck"), nv)
	runtime.GC()
	runtime.ReadMemStats(&after)

	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d publishes x %d nodes in %v; fast agents caught up %v after the last; responses per fast agent %v",
		publishes, len(nodes), publishing, catchUp, responses(agents))
	t.Logf("heap: %d KiB before, %d KiB after, growth %d KiB; stuck node pending %+v",
		before.HeapAlloc>>10, after.HeapAlloc>>10, growth>>10, h.status("stuck").Pending)
	// A server queueing encoded responses would hold ~1000 x 20 changed
	// views (~6 MB).
	if growth > 8<<20 {
		t.Errorf("heap grew by %d KiB while one agent was stuck", growth>>10)
	}
	if catchUp > 5*time.Second {
		t.Errorf("fast agents took %v to catch up", catchUp)
	}
}

// generations builds n generations of services big views up front.
func generations(t *testing.T, n, services int) [][]*cache.View {
	gens := make([][]*cache.View, n)
	for g := range gens {
		gens[g] = make([]*cache.View, services)
		for i := range services {
			gens[g][i] = bigService(t, i, uint32(g))
		}
	}
	return gens
}

// churn moves count services, from the from-th change on, to their next
// generation, and returns the new view and the changed names.
func churn(nv *cachetest.NodeView, gens [][]*cache.View, from, count int) (*cachetest.NodeView, []string) {
	services := len(gens[0])
	changed := make([]*cache.View, count)
	names := make([]string, count)
	for j := range changed {
		k := from + j
		changed[j] = gens[(k/services+1)%len(gens)][k%services]
		names[j] = changed[j].Name
	}
	return nv.With(changed...), names
}

func checkBounded(t *testing.T, st cache.NodeStatus, nv cache.NodeView) {
	t.Helper()
	if p := st.Pending; p.DirtyNames > nv.Len() || p.InFlight > 1 {
		t.Errorf("stuck node pending %+v: want at most %d dirty names and 1 in flight", p, nv.Len())
	}
}

func TestOversizeResponseIsSplit(t *testing.T) {
	const limit = 4096
	c, nv1 := servertest.Published("n1", cachetest.Services(t, "ns", 300, 0)...)
	h := start(t, c, stream.Options{MaxMessageBytes: limit})
	cl := h.open(t, "n1", nil, true)

	parts := cl.batch()
	checkParts(t, parts, limit, nv1)
	cl.Ack(parts[len(parts)-1], nil)
	servertest.WaitAcked(t, h.cache, "n1", nv1.Version())

	// A NACK of a part abandons the batch: no further part is sent, and
	// the agent keeps the acknowledged view.
	nv2 := cachetest.NewNodeView(cachetest.Services(t, "ns", 300, 1)...)
	c.Publish("n1", nv2, nil)
	p1 := cl.Recv()
	if p1.GetSystemVersion() != "" {
		t.Fatalf("first part carries version %q, want none", p1.GetSystemVersion())
	}
	cl.nack(p1.GetNonce(), "cannot parse")
	servertest.Eventually(t, "NACK", func() bool { st := h.status("n1"); return st.LastNack != nil && st.Pending.InFlight == 0 })

	nv3 := nv2.With(svc(t, 5, 9))
	c.Publish("n1", nv3, []string{"ns/svc-005"})
	parts = cl.batch()
	checkParts(t, parts, limit, nv3)
	if st := h.status("n1"); st.AckedVersion != nv1.Version() {
		t.Errorf("acked %q, want %q", st.AckedVersion, nv1.Version())
	}
}

// checkParts checks that parts are within limit, that only the last has a
// version, and that together they carry all of want.
func checkParts(t *testing.T, parts []*switchyardv1.DeltaSnapshotsResponse, limit int, want cache.NodeView) {
	t.Helper()
	if len(parts) < 3 {
		t.Errorf("%d parts, want at least 3", len(parts))
	}
	var got []*switchyardv1.Resource
	nonces := map[string]bool{}
	for i, p := range parts {
		if n := proto.Size(p); n > limit {
			t.Errorf("part %d is %d bytes, over the %d limit", i, n, limit)
		}
		if last := i == len(parts)-1; last != (p.GetSystemVersion() != "") {
			t.Errorf("part %d of %d has system version %q", i, len(parts), p.GetSystemVersion())
		}
		if nonces[p.GetNonce()] {
			t.Errorf("nonce %q reused", p.GetNonce())
		}
		nonces[p.GetNonce()] = true
		got = append(got, p.GetResources()...)
	}
	if v := parts[len(parts)-1].GetSystemVersion(); v != want.Version() {
		t.Errorf("batch version %q, want %q", v, want.Version())
	}
	all, err := cachetest.Resources(want)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all, got, protocmp.Transform()); diff != "" {
		t.Errorf("reassembled view (-want +got):\n%s", diff)
	}
}
