package guest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vishvananda/netlink"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Addresses of TestExplainAgreesWithTraffic. The load-balancer IPs are
// outside every range of the topology (TEST-NET-3): the client reaches
// them by a route through the node, as through a load balancer.
var (
	explainVIP  = netip.MustParseAddr("10.96.0.20")
	openLBVIP   = netip.MustParseAddr("10.96.0.30")
	closedLBVIP = netip.MustParseAddr("10.96.0.31")
	openLBIP    = netip.MustParseAddr("203.0.113.10")
	closedLBIP  = netip.MustParseAddr("203.0.113.11")
	lbRoute     = netip.MustParsePrefix("203.0.113.0/24")
)

const (
	// serviceCIDR is the topology's default service CIDR.
	serviceCIDR = "10.96.0.0/16"
	// explainTries is how many connections test one packet (at least
	// two per endpoint for a forwarded one).
	explainTries = 6
)

// explainSource is where a sampled packet comes from: a namespace and the
// address its sockets are bound to, the packet's source.
type explainSource struct {
	name string
	ns   string
	ip   netip.Addr
}

// explainCase is one packet asked of explain.Explain and then sent for
// real from its source.
type explainCase struct {
	what  string
	from  explainSource
	proto dataplane.Protocol
	dst   netip.AddrPort
}

func (c explainCase) packet() explain.Packet {
	return explain.Packet{Protocol: c.proto, Src: c.from.ip, Dst: c.dst.Addr(), Port: c.dst.Port()}
}

// TestExplainAgreesWithTraffic: for a sample of packets on a small state
// applied by the real IPVS dataplane — a cluster IP from the node, from
// the outside client and from a pod; a cluster-IP port without endpoints
// (TCP and UDP); a port no service serves on a service address; a node
// port under externalTrafficPolicy Local with and without a local
// endpoint, from the client, a pod and the node itself; load-balancer IPs
// whose loadBalancerSourceRanges hold the client or not; a pod reached
// directly — what explain.Explain says the ipvs mode does is what real
// connections meet: forward means every attempt is answered, by exactly
// the endpoints named, and the endpoint sees the packet's source unless
// masqueraded (then an address of the node); reject means every attempt
// is refused (TCP reset or ICMP unreachable); drop means every attempt
// times out; pass means the destination itself answers, seeing the
// source. Sockets are bound to the packet's source, so the kernel sees
// exactly the packet Explain is asked about (a node's own connection to
// a service address would otherwise leave from that address).
//
// The sample runs with a local and a remote endpoint, then with the
// local one removed twice: while its real servers drain (weight 0, the
// virtual servers kept for the connections still open) and once drained.
// Explain reads the state only, so it cannot see a drain: what differs
// then is listed in knownDisagreements, and checked to stay as found.
func TestExplainAgreesWithTraffic(t *testing.T) {
	b := useBed(t)
	clock := clocktesting.NewFakeClock(time.Now())
	const grace = 10 * time.Minute
	a := b.newAgent(t, func(c *ipvs.Config) { c.Clock, c.GracePeriod = clock, grace })
	b.routeVia(t, b.topo.Client().NS, lbRoute, b.node.IP)

	local, remote, outsider := b.pods[0], b.pods[1], b.pods[2]
	node := explainSource{"node", b.node.NS, b.node.IP}
	client := explainSource{"client", b.topo.Client().NS, b.topo.Client().IP}
	pod := explainSource{outsider.Name, outsider.NS, outsider.IP}
	vip := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(explainVIP, port) }
	np := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(b.node.IP, port) }
	cases := []explainCase{
		{"node to the cluster IP", node, dataplane.TCP, vip(80)},
		{"client to the cluster IP", client, dataplane.TCP, vip(80)},
		{"pod to the cluster IP", pod, dataplane.TCP, vip(80)},
		{"client to the cluster IP, UDP", client, dataplane.UDP, vip(53)},
		{"node to a cluster-IP port without endpoints", node, dataplane.TCP, vip(81)},
		{"client to a cluster-IP port without endpoints", client, dataplane.TCP, vip(81)},
		{"client to a cluster-IP UDP port without endpoints", client, dataplane.UDP, vip(54)},
		{"client to a port no service serves on the cluster IP", client, dataplane.TCP, vip(82)},
		{"client to the ETP Local node port", client, dataplane.TCP, np(30080)},
		{"pod to the ETP Local node port", pod, dataplane.TCP, np(30080)},
		{nodeOwnNodePort, node, dataplane.TCP, np(30080)},
		{"client to a node port without endpoints", client, dataplane.TCP, np(30081)},
		{"client to a load-balancer IP whose ranges hold it", client, dataplane.TCP, netip.AddrPortFrom(openLBIP, 80)},
		{"client to a load-balancer IP whose ranges exclude it", client, dataplane.TCP, netip.AddrPortFrom(closedLBIP, 80)},
		{"pod to a load-balancer IP whose ranges exclude it", pod, dataplane.TCP, netip.AddrPortFrom(closedLBIP, 80)},
		{"node to a load-balancer IP whose ranges exclude it", node, dataplane.TCP, netip.AddrPortFrom(closedLBIP, 80)},
		{"client to a pod directly", client, dataplane.TCP, backend(outsider)},
	}
	both := []*switchyardv1.Endpoint{b.endpoint(local, true), b.endpoint(remote, false)}
	remoteOnly := []*switchyardv1.Endpoint{b.endpoint(remote, false)}
	for _, step := range []struct {
		name   string
		eps    []*switchyardv1.Endpoint
		before func(t *testing.T)
	}{
		{stepBoth, both, nil},
		{stepDraining, remoteOnly, nil},
		{stepDrained, remoteOnly, func(t *testing.T) {
			clock.Step(grace)
			if n, err := a.dp.Drain(t.Context()); err != nil || n != 0 {
				t.Fatalf("Drain after the grace period: %d still draining, %v", n, err)
			}
			if vs, ok := a.virtualServer(t, tcpKey(b.node.IP, 30080)); ok {
				t.Fatalf("drained, the node port's virtual server is still there: %+v", vs)
			}
		}},
	} {
		t.Run(step.name, func(t *testing.T) {
			st := b.explainState(step.eps)
			a.apply(t, st, false)
			if step.before != nil {
				step.before(t)
			}
			for _, c := range cases {
				b.checkExplain(t, a, st, c, knownDisagreements[step.name+"/"+c.what])
			}
		})
	}
}

// Steps of TestExplainAgreesWithTraffic, and its case the drain affects.
const (
	stepBoth        = "a local and a remote endpoint"
	stepDraining    = "no local endpoint, the removed one draining"
	stepDrained     = "no local endpoint, drained"
	nodeOwnNodePort = "node to its own ETP Local node port"
)

// knownDisagreement is a case where traffic is known to differ from
// Explain, by step and case: traffic must fail every attempt with reason,
// Explain must say so in a note, and why says what the kernel does.
type knownDisagreement struct {
	reason probe.Reason
	why    string
	// note is what Explain's notes must say of it (the state it reads
	// cannot tell the verdict).
	note string
}

// knownDisagreements of TestExplainAgreesWithTraffic, by "step/case".
var knownDisagreements = map[string]*knownDisagreement{
	stepDraining + "/" + nodeOwnNodePort: {probe.ReasonRefused, "the node port's virtual server is kept while " +
		"its removed real server drains (weight 0). The node's own connection meets IPVS at LOCAL_OUT, " +
		"before the filter INPUT rule that drops it (the DROP set): IPVS finds no real server with a " +
		"weight and answers ICMP port unreachable (ip_vs_leave). Clients from the network meet the " +
		"filter rule first (INPUT runs before IPVS's LOCAL_IN hook) and are dropped. Explain reads the " +
		"state, which has no drain in it", "they are refused until the drain ends"},
}

// endpoint is p's echo server as an endpoint of every port of the
// sample, on this node or, with local false, named on another one (it
// is on this node's bridge all the same: only the view says where).
func (b *bed) endpoint(p netns.Pod, local bool) *switchyardv1.Endpoint {
	nodeName := b.node.Name
	if !local {
		nodeName = "node-elsewhere"
	}
	return &switchyardv1.Endpoint{Address: p.IP.String(), Ready: true, Serving: true, IsLocal: local, NodeName: nodeName,
		Ports: []*switchyardv1.EndpointPort{{Name: "dns", Port: backendPort}, {Name: "http", Port: backendPort}}}
}

// explainState is the sample's state: service "local" (a NodePort with
// externalTrafficPolicy Local over eps: http tcp 80 on node port 30080,
// dns udp 53, and idle tcp 81 on node port 30081 and idle-udp udp 54,
// which no endpoint serves), and two LoadBalancer services over the same
// endpoints, "open-lb" whose source range is the client and "closed-lb"
// whose is TEST-NET-1.
func (b *bed) explainState(eps []*switchyardv1.Endpoint) *dataplane.State {
	var localEps []*switchyardv1.Endpoint
	for _, ep := range eps {
		if ep.GetIsLocal() {
			localEps = append(localEps, ep)
		}
	}
	port := func(name string, p switchyardv1.Protocol, port, nodePort uint32, served bool) *switchyardv1.ServicePort {
		return &switchyardv1.ServicePort{Name: name, Protocol: p, Port: port, NodePort: nodePort, HasAnyEndpoints: &served}
	}
	tcp, udp := switchyardv1.Protocol_PROTOCOL_TCP, switchyardv1.Protocol_PROTOCOL_UDP
	cluster, localPolicy := switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER, switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	svcs := []*switchyardv1.ServiceView{{
		Namespace: "default", Name: "local", Type: switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT,
		ClusterIps: []string{explainVIP.String()},
		Ports: []*switchyardv1.ServicePort{port("http", tcp, 80, 30080, true), port("dns", udp, 53, 0, true),
			port("idle", tcp, 81, 30081, false), port("idle-udp", udp, 54, 0, false)},
		ExternalTrafficPolicy: localPolicy, InternalTrafficPolicy: cluster,
		ClusterEndpoints: eps, LocalEndpoints: localEps, HasAnyEndpoints: len(eps) > 0,
	}}
	for _, lb := range []struct {
		name     string
		vip, lbi netip.Addr
		ranges   string
	}{
		{"open-lb", openLBVIP, openLBIP, netip.PrefixFrom(b.topo.Client().IP, 32).String()},
		{"closed-lb", closedLBVIP, closedLBIP, "192.0.2.0/24"},
	} {
		svcs = append(svcs, &switchyardv1.ServiceView{
			Namespace: "default", Name: lb.name, Type: switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER,
			ClusterIps: []string{lb.vip.String()}, LoadBalancerIps: []string{lb.lbi.String()},
			LoadBalancerSourceRanges: []string{lb.ranges},
			Ports:                    []*switchyardv1.ServicePort{port("http", tcp, 80, 0, true)},
			ExternalTrafficPolicy:    cluster, InternalTrafficPolicy: cluster,
			ClusterEndpoints: eps, LocalEndpoints: localEps, HasAnyEndpoints: len(eps) > 0,
		})
	}
	st := b.state("rr", svcs...)
	st.Config.ServiceCidrs = []string{serviceCIDR}
	return st
}

// routeVia routes dst via gw in namespace ns until the test ends.
func (b *bed) routeVia(t testing.TB, ns string, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	edit := func(op func(*netlink.Route) error) error {
		return b.topo.Do(ns, func() error {
			l, err := netlink.LinkByName(netns.Uplink)
			if err != nil {
				return err
			}
			return op(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw.AsSlice(),
				Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())}})
		})
	}
	if err := edit(netlink.RouteReplace); err != nil {
		t.Fatalf("route %s via %s in %s: %v", dst, gw, ns, err)
	}
	t.Cleanup(func() {
		if err := edit(netlink.RouteDel); err != nil {
			t.Errorf("remove the route %s from %s: %v", dst, ns, err)
		}
	})
}

// checkExplain asks Explain about c's packet, sends it for real and
// reports a disagreement as an error, with what the kernel holds for the
// destination; known, when not nil, is a disagreement expected here.
func (b *bed) checkExplain(t *testing.T, a *agent, st *dataplane.State, c explainCase, known *knownDisagreement) {
	t.Helper()
	pkt := c.packet()
	v := explain.Explain(st, a.dp.Mode(), pkt)
	n, timeout := explainTries, probeTimeout
	switch v.Action {
	case explain.Forward:
		// Every endpoint must answer: rr gives each of k endpoints
		// n/k of n new connections.
		n = max(n, 2*len(v.Endpoints))
	case explain.Reject:
		// A TCP connection refused by ICMP fails at a SYN retransmit
		// (1, 3, 7 s) when the error is lost: a few attempts, and time
		// for the retransmits. (newBed turns the node's per-peer ICMP
		// rate limit off.)
		n, timeout = 3, 2*probeTimeout
	}
	res := b.send(t, c.from.ns, pkt, n, timeout)
	notes := ""
	if len(v.Notes) > 0 {
		notes = "\n  notes: " + strings.Join(v.Notes, "; ")
	}
	d := b.trafficDiffers(v, res, pkt)
	switch {
	case known != nil && d == "":
		t.Errorf("%s (%s): Explain says %q and traffic now agrees: remove the known disagreement (%s)", c.what, pkt, v, known.why)
	case known != nil && res.Reasons()[known.reason] != res.Attempts:
		t.Errorf("%s (%s from %s): Explain says %q; traffic: %s, and not as known (every attempt %s): %v\n  kernel: %s",
			c.what, pkt, c.from.name, v, d, known.reason, res, b.kernelView(t, a, pkt))
	case known != nil && !slices.ContainsFunc(v.Notes, func(n string) bool { return strings.Contains(n, known.note) }):
		t.Errorf("%s (%s): a known disagreement, but Explain does not say so (want a note with %q):%s", c.what, pkt, known.note, notes)
	case known != nil:
		t.Logf("KNOWN DISAGREEMENT %s (%s): Explain says %q; traffic: %s: %v\n  kernel: %s\n  why: %s",
			c.what, pkt, v, d, res, b.kernelView(t, a, pkt), known.why)
	case d != "":
		t.Errorf("%s (%s from %s): Explain says %q; traffic: %s\n  traffic: %v, sources seen by the endpoints %v%s\n  kernel: %s",
			c.what, pkt, c.from.name, v, d, res, res.Clients, notes, b.kernelView(t, a, pkt))
	default:
		t.Logf("%s (%s): %s; traffic agrees: %v, sources seen %v", c.what, pkt, v, res, res.Clients)
	}
}

// kernelView describes the virtual server of pkt's destination and its
// real servers, as the kernel holds them.
func (b *bed) kernelView(t testing.TB, a *agent, pkt explain.Packet) string {
	t.Helper()
	key := ipvs.VSKey{Addr: pkt.Dst, Port: pkt.Port, Protocol: dataplane.TCP}
	if pkt.Protocol == dataplane.UDP {
		key.Protocol = dataplane.UDP
	}
	vs, ok := a.virtualServer(t, key)
	if !ok {
		return "no virtual server " + key.String()
	}
	rss := a.realServers(t, key)
	parts := make([]string, 0, len(rss))
	for _, ap := range slices.SortedFunc(maps.Keys(rss), netip.AddrPort.Compare) {
		rs := rss[ap]
		parts = append(parts, fmt.Sprintf("%s weight %d active %d inactive %d", ap, rs.Weight, rs.ActiveConns, rs.InactiveConns))
	}
	return fmt.Sprintf("virtual server %s (%s), real servers [%s]", key, vs.Scheduler, strings.Join(parts, ", "))
}

// trafficDiffers says how real connections disagree with v, "" when they
// agree.
func (b *bed) trafficDiffers(v explain.Verdict, res probe.Result, pkt explain.Packet) string {
	src := pkt.Src.String()
	kept := res.Clients[src]
	switch v.Action {
	case explain.Forward:
		var want []string
		for _, sh := range v.Endpoints {
			name := b.podAt(sh.Endpoint.Addr())
			if sh.Endpoint.Port() != backendPort {
				return fmt.Sprintf("endpoint %s is not on the echo port %d", sh.Endpoint, backendPort)
			}
			want = append(want, name)
		}
		if !answeredByExactly(res, want) {
			return fmt.Sprintf("want every attempt answered, by exactly %v", want)
		}
		nodeAddrs := []string{b.node.IP.String(), b.node.PodGateway.String()}
		switch {
		case v.Masquerade && kept > 0:
			return fmt.Sprintf("masqueraded, but the endpoints saw the source %s in %d of %d replies", src, kept, res.Attempts)
		case v.Masquerade && slices.ContainsFunc(slices.Collect(maps.Keys(res.Clients)), func(c string) bool { return !slices.Contains(nodeAddrs, c) }):
			return fmt.Sprintf("masqueraded, but the endpoints saw %v, not only addresses of the node %v", res.Clients, nodeAddrs)
		case !v.Masquerade && kept != res.Attempts:
			return fmt.Sprintf("not masqueraded, but the endpoints saw the source %s in only %d of %d replies", src, kept, res.Attempts)
		}
	case explain.Reject:
		if r := res.Reasons(); r[probe.ReasonRefused]+r[probe.ReasonReset] != res.Attempts {
			return fmt.Sprintf("want every attempt refused, got %v", r)
		}
	case explain.Drop:
		if r := res.Reasons(); r[probe.ReasonTimeout] != res.Attempts {
			return fmt.Sprintf("want every attempt to time out, got %v", r)
		}
	case explain.Pass:
		// Left alone, the packet reaches its destination as addressed:
		// in this sample a pod's echo server, which sees the source.
		want := b.podAt(pkt.Dst)
		if !answeredByExactly(res, []string{want}) || kept != res.Attempts {
			return fmt.Sprintf("want every attempt answered by the destination %s itself, seeing the source %s", want, src)
		}
	default:
		return fmt.Sprintf("unknown action %q", v.Action)
	}
	return ""
}

// answeredByExactly reports whether every attempt got a reply, each of
// want answered some and nobody else did.
func answeredByExactly(res probe.Result, want []string) bool {
	if len(res.Failures) > 0 || res.Succeeded() != res.Attempts {
		return false
	}
	want = slices.Compact(slices.Sorted(slices.Values(want)))
	return slices.Equal(slices.Sorted(maps.Keys(res.Counts)), want)
}

// podAt names the pod with address a, or returns a.
func (b *bed) podAt(a netip.Addr) string {
	if i := slices.IndexFunc(b.pods, func(p netns.Pod) bool { return p.IP == a }); i >= 0 {
		return b.pods[i].Name
	}
	return a.String()
}

// send makes n attempts of pkt at once from namespace ns, each a new
// socket bound to the packet's source address and bounded by timeout: a
// TCP connection reading the echo server's reply line, or one UDP
// exchange. It records them as the probe package does (failures
// classified by probe.Classify).
func (b *bed) send(t testing.TB, ns string, pkt explain.Packet, n int, timeout time.Duration) probe.Result {
	t.Helper()
	res := probe.Result{Attempts: n, Counts: map[string]int{}, Clients: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var setup []error
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			reply, err := b.attempt(t.Context(), ns, pkt, timeout)
			var name, client string
			if err == nil {
				if name, client, err = echo.ParseReply(reply); err == nil && name == "" {
					err = errors.New("empty reply")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var se *setupError
			switch {
			case errors.As(err, &se):
				setup = append(setup, err)
			case err != nil:
				res.Failures = append(res.Failures, probe.Failure{Attempt: i, At: time.Since(start), Reason: probe.Classify(err), Err: err})
			default:
				res.Counts[name]++
				if host, _, err := net.SplitHostPort(client); err == nil {
					client = host
				}
				res.Clients[client]++
			}
		})
	}
	wg.Wait()
	if len(setup) > 0 {
		t.Fatalf("send %s from %s: %v", pkt, ns, errors.Join(setup...))
	}
	slices.SortFunc(res.Failures, func(x, y probe.Failure) int { return x.Attempt - y.Attempt })
	res.Elapsed = time.Since(start)
	return res
}

// setupError is a failure of the test, not of the attempt.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// attempt is one connection (TCP) or exchange (UDP) of pkt from ns,
// bounded by timeout.
func (b *bed) attempt(ctx context.Context, ns string, pkt explain.Packet, timeout time.Duration) ([]byte, error) {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	dst := netip.AddrPortFrom(pkt.Dst, pkt.Port).String()
	var conn net.Conn
	var dialErr error
	if err := b.topo.Do(ns, func() error {
		d := net.Dialer{}
		switch pkt.Protocol {
		case dataplane.TCP:
			d.LocalAddr = &net.TCPAddr{IP: pkt.Src.AsSlice()}
		case dataplane.UDP:
			d.LocalAddr = &net.UDPAddr{IP: pkt.Src.AsSlice()}
		default:
			return fmt.Errorf("protocol %q", pkt.Protocol)
		}
		conn, dialErr = d.DialContext(ctx, pkt.Protocol.String(), dst)
		return nil
	}); err != nil {
		return nil, &setupError{err}
	}
	if dialErr != nil {
		return nil, dialErr
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if pkt.Protocol == dataplane.UDP {
		if _, err := conn.Write([]byte("explain")); err != nil {
			return nil, err
		}
		buf := make([]byte, 64<<10)
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
	line, err := bufio.NewReaderSize(conn, 512).ReadSlice('\n')
	if err != nil && len(line) == 0 {
		return nil, err
	}
	return line, nil
}
