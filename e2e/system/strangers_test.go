package system_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// strangers is how many streams testStrangersBounded opens for names that
// are not Nodes: more than the control plane's default bound (100).
const strangers = 130

// testStrangersBounded: each of 130 clients holds a valid certificate for
// a name that is no Node (what a compromised node-bootstrap or a
// misconfigured PKI can give) and opens a stream as that name. Before,
// every one took a cache entry, a watch and a session for as long as it
// stayed (1,000 were measured); now the first 100 are held, the rest are
// refused with RESOURCE_EXHAUSTED and counted, and the real agents keep
// their streams and keep following changes.
func testStrangersBounded(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	before, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code codes.Code
		err  error
	}
	results := make(chan result, strangers)
	var wg sync.WaitGroup
	sctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	for i := range strangers {
		name := "stranger-" + strconv.Itoa(i)
		cert, err := e.c.PKI.NodeCert(name)
		if err != nil {
			t.Fatal(err)
		}
		// One connection per certificate: the identity is the TLS peer's.
		c, err := grpc.NewClient(e.c.Target, grpc.WithTransportCredentials(credentials.NewTLS(e.c.PKI.ClientTLS(&cert))))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := switchyardv1.NewDiscoveryServiceClient(c).DeltaSnapshots(sctx)
			if err == nil {
				err = st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: name, AgentVersion: "e2e-stranger"}})
			}
			if err == nil {
				_, err = st.Recv() // an admitted stranger gets nothing: blocks until stop
			}
			results <- result{status.Code(err), err}
		}()
	}
	metric := `switchyard_controlplane_unknown_node_streams`
	refusedMetric := `switchyard_controlplane_unknown_node_streams_refused_total`
	if err := poll(ctx, time.Minute, func() (bool, string) {
		m, err := e.c.ControlPlaneMetrics(ctx, 0)
		return err == nil && m[metric]+m[refusedMetric] >= strangers, fmt.Sprint(m[metric], " open, ", m[refusedMetric], " refused, ", err)
	}); err != nil {
		t.Fatalf("every stranger admitted or refused: %v", err)
	}
	m, err := e.c.ControlPlaneMetrics(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d streams for names that are not Nodes: %v held, %v refused", strangers, m[metric], m[refusedMetric])
	if m[metric] != 100 || m[refusedMetric] != strangers-100 {
		t.Errorf("held %v and refused %v, want 100 and %d", m[metric], m[refusedMetric], strangers-100)
	}
	for range strangers - 100 {
		if r := <-results; r.code != codes.ResourceExhausted {
			t.Errorf("a refused stranger got %v (%v), want ResourceExhausted", r.code, r.err)
		}
	}

	// The real agents: their streams untouched while the strangers are
	// held, and settled once they left.
	after, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range before {
		if !after[name].GetConnected() || !after[name].GetConnectedSince().AsTime().Equal(b.GetConnectedSince().AsTime()) {
			t.Errorf("%s's agent stream was disturbed by the strangers", name)
		}
	}
	stop()
	wg.Wait()
	if err := poll(ctx, 30*time.Second, func() (bool, string) {
		m, err := e.c.ControlPlaneMetrics(ctx, 0)
		return err == nil && m[metric] == 0, fmt.Sprint(m[metric], err)
	}); err != nil {
		t.Errorf("slots not freed after the strangers left: %v", err)
	}
	e.settled(t, "strangers")
}
