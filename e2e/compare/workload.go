package compare

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// The workload's address plan (inside the test bed's 10.96.0.0/16 service
// range and the topology's 10.244.0.0/16 cluster CIDR). Service i has
// cluster IP 10.96.(1+i/250).(i%250+1); endpoint e of service i is
// 10.244.(n/250).(n%250+1) with n = i*endpoints+e; change c moves an
// endpoint to 10.245.(c/250).(c%250+1), an address no other rule holds.
const (
	workloadNS  = "compare"
	clusterCIDR = "10.244.0.0/16"
	servicePort = 80
	targetPort  = 8080
	sliceSuffix = "a"
	zoneName    = "zone-a"
	maxServices = 60000 // keeps every address inside its /16
)

// workload is M services × K endpoints in one namespace, created through
// the API, and the changes made to them.
type workload struct {
	cs        kubernetes.Interface
	slices    *eps.Client
	log       *slog.Logger
	services  int
	endpoints int
	vips      map[netip.Addr]bool // every service's cluster IP
	changes   atomic.Int64        // changes made so far (addresses stay unique)
	// podAddrs, when set (carryTraffic), are the endpoints of every
	// service instead of addresses no packet is sent to.
	podAddrs []netip.Addr
	// sample are the services the data path dials, ascending; sampled
	// service k is also a NodePort service on firstNodePort+k.
	sample    []int
	nodePorts map[int]int32
}

// carryTraffic makes the workload's services reach the plan's pods, and
// the sampled ones NodePort services (Config.DataPath).
func (w *workload) carryTraffic(plan netns.Plan, samples int) {
	for _, p := range plan.Pods() {
		w.podAddrs = append(w.podAddrs, p.IP)
	}
	w.sample = sampleServices(w.services, samples)
	w.nodePorts = make(map[int]int32, len(w.sample))
	for k, i := range w.sample {
		w.nodePorts[i] = int32(firstNodePort + k)
	}
}

func newWorkload(cs kubernetes.Interface, services, endpoints int, log *slog.Logger) (*workload, error) {
	if services < 1 || services > maxServices/endpoints || endpoints < 1 {
		return nil, fmt.Errorf("workload: %d services × %d endpoints is outside the address plan", services, endpoints)
	}
	w := &workload{cs: cs, slices: eps.New(cs), log: log, services: services, endpoints: endpoints,
		vips: make(map[netip.Addr]bool, services)}
	for i := range services {
		w.vips[serviceAddr(i).Addr()] = true
	}
	return w, nil
}

func serviceName(i int) string { return fmt.Sprintf("s%05d", i) }

func serviceIP(i int) string { return fmt.Sprintf("10.96.%d.%d", 1+i/250, i%250+1) }

// serviceAddr is service i's cluster IP and port.
func serviceAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(serviceIP(i)), servicePort)
}

func endpointIP(n int) string { return fmt.Sprintf("10.244.%d.%d", n/250, n%250+1) }

func changeIP(c int) string { return fmt.Sprintf("10.245.%d.%d", c/250, c%250+1) }

// slice is service i's EndpointSlice; when moved is valid, the last
// endpoint is at moved instead of its own address.
func (w *workload) slice(i int, node string, moved netip.Addr) eps.Slice {
	s := eps.Slice{Namespace: workloadNS, Service: serviceName(i), Suffix: sliceSuffix,
		Ports: []eps.Port{eps.TCP("http", targetPort)}}
	for e := range w.endpoints {
		addr := endpointIP(i*w.endpoints + e)
		if len(w.podAddrs) > 0 {
			// Rotated by service, so the first endpoint in rule order
			// is not always the same pod.
			addr = w.podAddrs[(i+e)%len(w.podAddrs)].String()
		}
		if moved.IsValid() && e == w.endpoints-1 {
			addr = moved.String()
		}
		s.Endpoints = append(s.Endpoints, eps.Ready(addr).OnNode(node).InZone(zoneName))
	}
	return s
}

// create makes the namespace, the Node and every Service with its
// EndpointSlice, parallel requests at a time.
func (w *workload) create(ctx context.Context, node string, nodeIP netip.Addr, parallel int) error {
	start := time.Now()
	if _, err := w.cs.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	if err := w.createNode(ctx, node, nodeIP); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	var done atomic.Int64
	for i := range w.services {
		g.Go(func() error {
			if err := w.createService(gctx, i, node); err != nil {
				return err
			}
			if n := done.Add(1); n%1000 == 0 {
				w.log.Info("services created", "done", n, "of", w.services, "elapsed", time.Since(start).Round(time.Millisecond))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	w.log.Info("workload created", "endpointsPerService", w.endpoints,
		"parallel", parallel, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

func (w *workload) createNode(ctx context.Context, name string, ip netip.Addr) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		corev1.LabelHostname: name, corev1.LabelTopologyZone: zoneName,
	}}}
	created, err := w.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	created.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: ip.String()}, {Type: corev1.NodeHostName, Address: name},
	}
	if _, err := w.cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set addresses of node %s: %w", name, err)
	}
	return nil
}

// createService creates service i and its slice in two requests: the
// created Service carries the UID the slice's owner reference needs.
func (w *workload) createService(ctx context.Context, i int, node string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadNS, Name: serviceName(i)},
		Spec: corev1.ServiceSpec{ClusterIP: serviceIP(i), Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: servicePort, TargetPort: intstr.FromInt32(targetPort),
		}}},
	}
	if np, ok := w.nodePorts[i]; ok {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = np
	}
	created, err := w.cs.CoreV1().Services(workloadNS).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create service %s: %w", svc.Name, err)
	}
	es, err := eps.Build(created, w.slice(i, node, netip.Addr{}), time.Time{})
	if err != nil {
		return err
	}
	if _, err := w.cs.DiscoveryV1().EndpointSlices(workloadNS).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create EndpointSlice %s: %w", es.Name, err)
	}
	return nil
}

// nextChange picks the next change: the last endpoint of one service
// (spread over the range) moves to a fresh address.
func (w *workload) nextChange() (i int, ip netip.Addr) {
	c := int(w.changes.Add(1) - 1)
	return (w.services/2 + c*7919) % w.services, netip.MustParseAddr(changeIP(c))
}

// applyChange writes the change. The slice is stamped with the
// trigger-time annotation (now), from which both proxies compute network
// programming latency.
func (w *workload) applyChange(ctx context.Context, node string, i int, ip netip.Addr) error {
	_, err := w.slices.Update(ctx, w.slice(i, node, ip))
	return err
}
