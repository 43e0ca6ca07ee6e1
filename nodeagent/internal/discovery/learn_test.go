package discovery_test

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// dials records the addresses one set of dial options connected to.
type dials struct {
	mu    sync.Mutex
	addrs []string
}

func (d *dials) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			d.mu.Lock()
			d.addrs = append(d.addrs, addr)
			d.mu.Unlock()
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}),
	}
}

func (d *dials) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Compact(slices.Clone(d.addrs))
}

// learner runs a client with learnt addresses and records OnLearnt.
type learner struct {
	c                  *discovery.Client
	configured, learnt dials

	mu      sync.Mutex
	onLearn [][]string
}

func startLearner(t *testing.T, a discovery.Applier, configured, learnt []string) *learner {
	t.Helper()
	l := &learner{}
	l.c = startWith(t, a, nil, func(c *discovery.Config) {
		c.Learnt = learnt
		c.DialOptions = l.configured.options()
		c.LearntDialOptions = l.learnt.options()
		c.OnLearnt = func(addrs []string) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.onLearn = append(l.onLearn, addrs)
		}
	}, configured...)
	return l
}

func (l *learner) calls() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.onLearn)
}

func nodeConfig(version string, addrs ...string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: "node-a", Version: version, Body: &switchyardv1.Resource_NodeConfig{
		NodeConfig: &switchyardv1.NodeConfig{NodeName: "node-a", ControlPlaneAddresses: addrs},
	}}
}

func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestLearntAddressesMidStream: a NodeConfig's addresses join the dial
// list while the stream goes on; the next reconnect dials them first,
// with the learnt dial options.
func TestLearntAddressesMidStream(t *testing.T) {
	configured, replica := cptest.New(t), cptest.New(t)
	l := startLearner(t, newApplier(), []string{configured.Addr()}, nil)
	configured.Next()
	configured.Push(batch("s1", "n1", nodeConfig("1", replica.Addr(), ""), svc("ns/a", "1")))
	wantACK(t, configured, "s1")
	if diff := cmp.Diff([][]string{{replica.Addr()}}, l.calls()); diff != "" {
		t.Errorf("OnLearnt calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{replica.Addr(), configured.Addr()}, l.c.Targets()); diff != "" {
		t.Errorf("Targets (-want +got):\n%s", diff)
	}
	// The same stream goes on: no reconnect for a new list.
	configured.Push(batch("s2", "n2", svc("ns/a", "2")))
	if r := configured.Next(); r.Stream != 1 || r.GetAppliedVersion() != "s2" {
		t.Fatalf("ACK on the first stream = %v", r)
	}
	// An empty list (nothing advertised) keeps what was learnt.
	configured.Push(batch("s3", "n3", nodeConfig("2")))
	configured.Next()
	if diff := cmp.Diff([]string{replica.Addr(), configured.Addr()}, l.c.Targets()); diff != "" {
		t.Errorf("Targets after an empty list (-want +got):\n%s", diff)
	}

	configured.EndStream(status.Error(codes.Unavailable, "shutting down"))
	again := replica.Next()
	if diff := cmp.Diff(map[string]string{"node-a": "2", "ns/a": "2"}, again.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions on the learnt replica (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{configured.Addr()}, l.configured.got()); diff != "" {
		t.Errorf("dialled with DialOptions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{replica.Addr()}, l.learnt.got()); diff != "" {
		t.Errorf("dialled with LearntDialOptions (-want +got):\n%s", diff)
	}
	if n := len(l.calls()); n != 1 {
		t.Errorf("OnLearnt called %d times, want 1", n)
	}
}

// TestLearntDialledFirst: a restarted agent dials its learnt replica
// before the configured address, and a dead learnt one is skipped.
func TestLearntDialledFirst(t *testing.T) {
	t.Run("learnt replica first", func(t *testing.T) {
		configured, replica := cptest.New(t), cptest.New(t)
		startLearner(t, newApplier(), []string{configured.Addr()}, []string{replica.Addr()})
		if r := replica.Next(); r.Stream != 1 || r.GetNode().GetName() != "node-a" {
			t.Fatalf("first request on the learnt replica = %v", r)
		}
		if n := configured.Streams(); n != 0 {
			t.Errorf("configured address got %d streams, want 0", n)
		}
	})
	t.Run("dead learnt replica skipped", func(t *testing.T) {
		configured := cptest.New(t)
		dead := deadAddr(t)
		l := startLearner(t, newApplier(), []string{configured.Addr()}, []string{dead})
		if r := configured.Next(); r.GetNode().GetName() != "node-a" {
			t.Fatalf("first request on the configured address = %v", r)
		}
		if diff := cmp.Diff([]string{dead}, l.learnt.got()); diff != "" {
			t.Errorf("dialled with LearntDialOptions (-want +got):\n%s", diff)
		}
	})
	t.Run("a learnt address also configured uses DialOptions", func(t *testing.T) {
		cp := cptest.New(t)
		l := startLearner(t, newApplier(), []string{cp.Addr()}, []string{cp.Addr()})
		cp.Next()
		if diff := cmp.Diff([]string{cp.Addr()}, l.c.Targets()); diff != "" {
			t.Errorf("Targets (-want +got):\n%s", diff)
		}
		if got := l.learnt.got(); len(got) != 0 {
			t.Errorf("dialled with LearntDialOptions: %v", got)
		}
	})
}

// TestNackLearnsNothing: addresses are taken only from an applied batch.
func TestNackLearnsNothing(t *testing.T) {
	cp := cptest.New(t)
	a := newApplier()
	a.setFail(status.Error(codes.Internal, "iptables-restore failed"))
	l := startLearner(t, a, []string{cp.Addr()}, nil)
	cp.Next()
	cp.Push(batch("s1", "n1", nodeConfig("1", "10.0.0.9:18000")))
	if r := cp.Next(); r.GetErrorDetail() == nil {
		t.Fatalf("want a NACK, got %v", r)
	}
	if diff := cmp.Diff([]string{cp.Addr()}, l.c.Targets()); diff != "" {
		t.Errorf("Targets (-want +got):\n%s", diff)
	}
}
