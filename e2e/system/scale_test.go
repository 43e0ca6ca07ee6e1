package system_test

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// target is one address to reach and the backend name that must answer.
type target struct {
	addr netip.AddrPort
	want []string // any of these
}

// sweep makes one connection to every target from namespace ns, 32 at a
// time, and returns the ones that failed or got the wrong backend.
func (e *env) sweep(ctx context.Context, ns string, targets []target) ([]string, error) {
	var mu sync.Mutex
	var bad []string
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	p := probe.New(e.c.Topo, ns)
	for _, tg := range targets {
		g.Go(func() error {
			res, err := p.TCP(ctx, tg.addr, probe.Options{Timeout: time.Second})
			if err != nil {
				return err
			}
			if !answeredAny(res, tg.want) {
				mu.Lock()
				bad = append(bad, fmt.Sprintf("%s: %v", tg.addr, res))
				mu.Unlock()
			}
			return nil
		})
	}
	return bad, g.Wait()
}

func answeredAny(res probe.Result, want []string) bool {
	if res.Succeeded() != res.Attempts || res.Attempts == 0 {
		return false
	}
	for name := range res.Counts {
		found := false
		for _, w := range want {
			found = found || name == w
		}
		if !found {
			return false
		}
	}
	return true
}

func summarize(bad []string) string {
	if len(bad) > 3 {
		return fmt.Sprintf("%d bad, first: %s", len(bad), strings.Join(bad[:3], "; "))
	}
	return strings.Join(bad, "; ")
}

// testHundredPorts: one Service with 100 TCP ports (the API's maximum per
// EndpointSlice); even ports target the pods' :8080 servers, odd ones a
// second server on :9090 named "<pod>.9090", so a port mapped to the wrong
// target is caught. Every port answers from every node.
func testHundredPorts(t *testing.T, e *env) {
	pods := []netns.Pod{e.pod(0), e.pod(1)}
	l := echo.Launcher{Topo: e.c.Topo}
	for _, p := range pods {
		if _, err := l.Start(t.Context(), p.NS, echo.Config{Name: p.Name + ".9090", TCP: ":9090"}); err != nil {
			t.Fatal(err)
		}
	}
	var spec corev1.ServiceSpec
	var ports []eps.Port
	var targets []target
	spec.ClusterIP = "10.96.1.10"
	for i := range 100 {
		name, tp, suffix := "p"+strconv.Itoa(i), int32(system.TargetPort), ""
		if i%2 == 1 {
			tp, suffix = 9090, ".9090"
		}
		spec.Ports = append(spec.Ports, corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP,
			Port: int32(1000 + i), TargetPort: intstr.FromInt32(tp)})
		ports = append(ports, eps.TCP(name, tp))
		targets = append(targets, target{
			addr: netip.AddrPortFrom(netip.MustParseAddr(spec.ClusterIP), uint16(1000+i)),
			want: []string{pods[0].Name + suffix, pods[1].Name + suffix},
		})
	}
	s := e.createService(t, "sc-ports", spec, ports...)
	e.measure(t, change{
		scenario: "hundred-ports",
		write:    func(ctx context.Context) error { return e.write(ctx, s, e.endpoints(pods...)...) },
		reached: func(ctx context.Context, n netns.Node) (bool, string) {
			bad, err := e.sweep(ctx, n.NS, targets)
			return err == nil && len(bad) == 0, fmt.Sprint(summarize(bad), err)
		},
	})
	bad, err := e.sweep(t.Context(), e.c.Topo.Client().NS, targets)
	if err != nil || len(bad) > 0 {
		t.Errorf("client: %s %v", summarize(bad), err)
	}
}

// createNamespace creates namespace ns unless it exists.
func (e *env) createNamespace(ctx context.Context, ns string) error {
	_, err := e.c.API.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// createServices creates n Services s-000… in namespace ns, the i-th on
// vip(i) with one EndpointSlice (pod i modulo the pods), 32 API calls in
// flight.
func (e *env) createServices(ctx context.Context, ns string, n int, vip func(i int) netip.AddrPort) error {
	cs := e.c.API.Client()
	pods := e.c.Topo.Pods()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			name := fmt.Sprintf("s-%03d", i)
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
				ClusterIP: vip(i).Addr().String(),
				Ports:     []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: int32(vip(i).Port())}},
			}}
			created, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			slice, err := eps.Build(created, eps.Slice{Namespace: ns, Service: name, Suffix: "a",
				Ports: []eps.Port{eps.TCP("http", system.TargetPort)}, Endpoints: e.endpoints(pods[i%len(pods)])}, time.Now())
			if err != nil {
				return err
			}
			_, err = cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("create services in %s: %w", ns, err)
	}
	return nil
}

// testFiveHundred: 500 Services, each with its own EndpointSlice (one pod),
// written at once, 32 API calls in flight; every node programs all of them
// and every cluster IP answers with its pod from every node.
func testFiveHundred(t *testing.T, e *env) {
	const n, ns = 500, "sc-many"
	if err := e.createNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	pods := e.c.Topo.Pods()
	targets := make([]target, n)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 96, byte(2 + i/256), byte(i % 256)})
		targets[i] = target{addr: netip.AddrPortFrom(ip, 80), want: []string{pods[i%len(pods)].Name}}
	}
	var writes time.Duration
	write := func(ctx context.Context) error {
		start := time.Now()
		defer func() { writes = time.Since(start) }()
		return e.createServices(ctx, ns, n, func(i int) netip.AddrPort { return targets[i].addr })
	}
	var sample []target
	for i := 49; i < n; i += 50 {
		sample = append(sample, targets[i])
	}
	e.measure(t, change{
		scenario: "five-hundred-services",
		write:    write,
		reached: func(ctx context.Context, node netns.Node) (bool, string) {
			if bad, err := e.sweep(ctx, node.NS, sample); err != nil || len(bad) > 0 {
				return false, fmt.Sprint("sample: ", summarize(bad), err)
			}
			bad, err := e.sweep(ctx, node.NS, targets)
			return err == nil && len(bad) == 0, fmt.Sprint(summarize(bad), err)
		},
		acked: func(before, now *switchyardv1.NodeStatus) bool {
			return now.GetResourceCount() >= before.GetResourceCount()+n && now.GetAckedVersion() == now.GetDesiredVersion()
		},
	})
	t.Logf("the %d Services and %d EndpointSlices took %v to write (to_traffic and to_ack include it)", n, n, writes.Round(time.Millisecond))
}
