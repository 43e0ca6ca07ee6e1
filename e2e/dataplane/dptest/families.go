package dptest

import (
	"maps"
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Families are the families a mode's traffic tests run over: each gets
// its own bed (NewBedFor), IPv4 an IPv4-only one, IPv6 a dual-stack one.
var Families = []dataplane.Family{dataplane.IPv4, dataplane.IPv6}

// ForFamilies runs fn as one subtest per family of Families, named after
// it ("IPv4", "IPv6").
func ForFamilies(t *testing.T, fn func(t *testing.T, f dataplane.Family)) {
	t.Helper()
	for _, f := range Families {
		t.Run(f.String(), func(t *testing.T) { fn(t, f) })
	}
}

// serviceBases are the first addresses of the topology's service CIDRs.
var serviceBases = map[dataplane.Family]netip.Addr{
	dataplane.IPv4: netns.DefaultServiceCIDR.Addr(),
	dataplane.IPv6: netns.DefaultServiceCIDR6.Addr(),
}

// ServiceIP is host number host (1..255) of the service CIDR of family
// f: 10.96.0.<host>, or fd00:96::<host in hex>.
func ServiceIP(f dataplane.Family, host byte) netip.Addr {
	b := serviceBases[f].AsSlice()
	b[len(b)-1] = host
	a, _ := netip.AddrFromSlice(b)
	return a
}

// VIP is the cluster IP and port the bed's family checks use:
// 10.96.0.10:80 or [fd00:96::a]:80.
func (b *Bed) VIP() netip.AddrPort { return netip.AddrPortFrom(ServiceIP(b.Family, 10), 80) }

// loopbacks never serve node ports, in either family.
var loopbacks = map[dataplane.Family]netip.Addr{
	dataplane.IPv4: netip.MustParseAddr("127.0.0.1"),
	dataplane.IPv6: netip.IPv6Loopback(),
}

// NodeIP is the node's address of the bed's family.
func (b *Bed) NodeIP() netip.Addr {
	if b.Family == dataplane.IPv6 {
		return b.Node.IP6
	}
	return b.Node.IP
}

// Gateway is the node's pod bridge address of the bed's family: the
// source the node masquerades traffic to its pods to.
func (b *Bed) Gateway() netip.Addr {
	if b.Family == dataplane.IPv6 {
		return b.Node.PodGateway6
	}
	return b.Node.PodGateway
}

// FamilyOf is the family of a.
func FamilyOf(a netip.Addr) dataplane.Family {
	if dataplane.IPv6.Has(a) {
		return dataplane.IPv6
	}
	return dataplane.IPv4
}

// PodIP is p's address of family f (invalid for IPv6 on an IPv4-only
// bed).
func PodIP(p netns.Pod, f dataplane.Family) netip.Addr {
	if f == dataplane.IPv6 {
		return p.IP6
	}
	return p.IP
}

// CheckClusterIPAndNodePort programs, with apply, a NodePort service on
// the bed's VIP (node port 30080) over its pods and checks connections
// spread over all of them: to the cluster IP from the node (output hook)
// and from the client (prerouting), and to the node port from the client.
// The client is outside the cluster CIDRs, so its connections are
// masqueraded: the pods see the node's bridge address of the family.
// The node port on the family's loopback address, from the node, must be
// refused at once: a loopback packet DNATed to a pod is dropped as a
// martian (IPv6 has no route_localnet to allow it), which is a hang.
func (b *Bed) CheckClusterIPAndNodePort(t *testing.T, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	vip := b.VIP()
	apply(t, State(b.Node, Service("web", vip.Addr().String(), 80, 30080, b.Pods...)))
	client := b.Topo.Client().NS
	for _, tc := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"cluster IP from node (output hook)", b.Node.NS, vip},
		{"cluster IP from client (prerouting hook)", client, vip},
		{"node port from client", client, netip.AddrPortFrom(b.NodeIP(), 30080)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.CheckSpread(t, tc.ns, tc.dst)
			if want := map[string]int{b.Gateway().String(): res.Attempts}; tc.ns == client && !maps.Equal(want, res.Clients) {
				t.Errorf("sources the pods saw: %v, want all masqueraded to %v", res.Clients, want)
			}
		})
	}
	t.Run("node port on loopback from node", func(t *testing.T) {
		b.CheckRefusedWithin(t, b.Node.NS, netip.AddrPortFrom(loopbacks[b.Family], 30080), RefuseWithin)
	})
}

// CheckAffinity programs a ClientIP-affinity cluster IP service on the
// bed's VIP and checks the client's connections all reach one pod.
func (b *Bed) CheckAffinity(t *testing.T, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	vip := b.VIP()
	sv := Service("sticky", vip.Addr().String(), 80, 0, b.Pods...)
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	sv.SessionAffinityTimeoutSeconds = 600
	apply(t, State(b.Node, sv))
	b.CheckPinned(t, b.Topo.Client().NS, vip)
}

// CheckNoEndpointsRefused programs a NodePort service on the bed's VIP
// (node port 30082) without endpoints and checks its cluster IP, from the
// node and the client, and its node port, from the client, refuse at once
// (a TCP reset, not a drop); likewise a UDP service without endpoints,
// whose reject is the family's ICMP port unreachable.
func (b *Bed) CheckNoEndpointsRefused(t *testing.T, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	vip := b.VIP()
	udp := netip.AddrPortFrom(ServiceIP(b.Family, 11), 53)
	apply(t, State(b.Node, Service("empty", vip.Addr().String(), 80, 30082), udpService(udp)))
	// The client reaches the service CIDR through the node, whose route
	// for it leaves by the interface the packet came in on: IPv4
	// forwarding answers each packet with an ICMP redirect as well, and
	// the redirect resets the per-host ICMP rate limit, so every port
	// unreachable to the client is suppressed (measured: node
	// OutRateLimitHost 5 of 5, client InDestUnreachs 0; with redirects
	// off, 5 of 5 arrive). IPv6 limits its errors apart from redirects.
	if err := b.Topo.SetSysctls(b.Node.NS, netns.Sysctl{Key: "net.ipv4.conf.all.send_redirects", Value: "0"},
		netns.Sysctl{Key: "net.ipv4.conf." + netns.Uplink + ".send_redirects", Value: "0"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, ns string }{{"node", b.Node.NS}, {"client", b.Topo.Client().NS}} {
		t.Run("UDP cluster IP from "+c.name, func(t *testing.T) { b.CheckUDPRefused(t, c.ns, udp) })
	}
	for _, tc := range []struct {
		name, ns string
		dst      netip.AddrPort
	}{
		{"cluster IP from node", b.Node.NS, vip},
		{"cluster IP from client", b.Topo.Client().NS, vip},
		{"node port from client", b.Topo.Client().NS, netip.AddrPortFrom(b.NodeIP(), 30082)},
	} {
		t.Run(tc.name, func(t *testing.T) { b.CheckRefusedFast(t, tc.ns, tc.dst) })
	}
}

// CheckETPLocal programs a NodePort service on the bed's VIP (node port
// 30081) with externalTrafficPolicy Local whose endpoints are all remote:
// the client's connections to the node port are dropped, while the node
// and its pods, which the policy does not apply to, reach the cluster
// endpoints through it (as kube-proxy short-circuits them: upstream e2e
// "should implement NodePort and HealthCheckNodePort correctly when
// ExternalTrafficPolicy changes" curls its own node's NodePort from a
// host-network pod), and the cluster IP still serves. With one local
// endpoint the client's connections reach that one only.
func (b *Bed) CheckETPLocal(t *testing.T, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	vip := b.VIP()
	sv := Service("local", vip.Addr().String(), 80, 30081, b.Pods...)
	sv.ExternalTrafficPolicy = switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL
	apply(t, State(b.Node, sv)) // endpoints exist, none local: drop
	np := netip.AddrPortFrom(b.NodeIP(), 30081)
	b.CheckDropped(t, b.Topo.Client().NS, np)
	b.CheckAnswered(t, b.Node.NS, np, 10, "own node port from the node under ETP Local")
	b.CheckAnswered(t, b.Pods[0].NS, np, 10, "own node port from a pod under ETP Local")
	b.CheckAnswered(t, b.Node.NS, vip, 10, "cluster IP under ETP Local")
	// A new message: Apply may keep what it was given (see State).
	sv = proto.Clone(sv).(*switchyardv1.ServiceView)
	sv.LocalEndpoints = sv.ClusterEndpoints[:1]
	sv.LocalEndpoints[0].IsLocal = true
	apply(t, State(b.Node, sv))
	b.CheckAnsweredBy(t, b.Topo.Client().NS, np, 10, 1, "node port with a local endpoint")
}

// CheckHairpin programs two cluster IP services whose only endpoint is
// one pod, a plain one and a ClientIP-affinity one, and has that pod
// connect to both: the packet leaves the bridge port it came in on
// (hairpin_mode=1) and the reply must come back through the node, so the
// dataplane must masquerade it (the pod sees its bridge's address of the
// family); without, the pod would answer itself directly and the
// connection would stall. Another pod reaching the same services keeps
// its own source address (only endpoint-to-itself is masqueraded).
func (b *Bed) CheckHairpin(t *testing.T, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	self, other := b.Pods[0], b.Pods[1]
	plain, sticky := netip.AddrPortFrom(ServiceIP(b.Family, 20), 80), netip.AddrPortFrom(ServiceIP(b.Family, 21), 80)
	stickySvc := Service("self-sticky", sticky.Addr().String(), 80, 0, self)
	stickySvc.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
	stickySvc.SessionAffinityTimeoutSeconds = 60
	apply(t, State(b.Node, Service("self", plain.Addr().String(), 80, 0, self), stickySvc))
	gateway := b.Gateway()
	const n = 20
	for _, vip := range []netip.AddrPort{plain, sticky} {
		res, err := probe.New(b.Topo, self.NS).TCP(t.Context(), vip, probe.Options{Count: n})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Failures) > 0 || res.Counts[self.Name] != n || res.Clients[gateway.String()] != n {
			t.Errorf("%v from its own endpoint: want %d answers by %s, each seeing %s: %s", vip, n, self.Name, gateway, res)
		}
		res, err = probe.New(b.Topo, other.NS).TCP(t.Context(), vip, probe.Options{Count: 5})
		if err != nil {
			t.Fatal(err)
		}
		if src := PodIP(other, b.Family).String(); len(res.Failures) > 0 || res.Clients[src] != 5 {
			t.Errorf("%v from another pod: source %s must be kept: %s", vip, src, res)
		}
	}
}

// CheckDualStackService programs, on a dual-stack bed, one NodePort
// service with a cluster IP of each family (node port 30083) and checks
// from the client that both cluster IPs and the node port on both node
// addresses spread over the pods: one view, split into a ruleset per
// family, each serving only its own family's endpoints.
func (b *Bed) CheckDualStackService(t *testing.T, apply func(*testing.T, *dataplane.State)) {
	t.Helper()
	if !b.DualStack() {
		t.Fatal("CheckDualStackService needs a dual-stack bed")
	}
	vip4, vip6 := ServiceIP(dataplane.IPv4, 30), ServiceIP(dataplane.IPv6, 30)
	apply(t, State(b.Node, serviceIn(Families, "dual", 30, 80, 30083, b.Pods...)))
	client := b.Topo.Client()
	for _, tc := range []struct {
		name string
		dst  netip.AddrPort
	}{
		{"IPv4 cluster IP", netip.AddrPortFrom(vip4, 80)},
		{"IPv6 cluster IP", netip.AddrPortFrom(vip6, 80)},
		{"IPv4 node port", netip.AddrPortFrom(b.Node.IP, 30083)},
		{"IPv6 node port", netip.AddrPortFrom(b.Node.IP6, 30083)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := probe.New(b.Topo, client.NS).TCP(t.Context(), tc.dst, probe.Options{Count: 300, Parallel: 8})
			if err != nil {
				t.Fatal(err)
			}
			CheckShares(t, res, len(b.Pods))
			for seen := range res.Clients {
				if FamilyOf(netip.MustParseAddr(seen)) != FamilyOf(tc.dst.Addr()) {
					t.Errorf("%v: a backend saw client %s, of the other family", tc.dst, seen)
				}
			}
		})
	}
}

// Apply programs st into a bed's node with the mode under test, failing
// the test on error.
type Apply func(*testing.T, *dataplane.State)

// ModeBed builds a mode's bed for family f (NewBedFor) and its Apply;
// with cleanup, the mode deletes stale UDP conntrack entries through
// netlink in the node namespace (Bed.NetfilterHandle), as the agent
// does, and without it keeps them (the control of the UDP checks).
type ModeBed func(t *testing.T, f dataplane.Family, cleanup bool) (*Bed, Apply)

// familyCheck is one check every kernel mode runs per family, each time
// on a fresh bed.
type familyCheck struct {
	name string
	// cleanup is the ModeBed argument.
	cleanup bool
	// dualStackOnly checks run on the IPv6 (dual-stack) bed only.
	dualStackOnly bool
	run           func(b *Bed, t *testing.T, apply Apply)
}

var familyChecks = []familyCheck{
	{name: "ClusterIPAndNodePort", run: func(b *Bed, t *testing.T, apply Apply) { b.CheckClusterIPAndNodePort(t, apply) }},
	{name: "AffinityPinsClient", run: func(b *Bed, t *testing.T, apply Apply) { b.CheckAffinity(t, apply) }},
	{name: "NoEndpointsRefused", run: func(b *Bed, t *testing.T, apply Apply) { b.CheckNoEndpointsRefused(t, apply) }},
	{name: "ETPLocal", run: func(b *Bed, t *testing.T, apply Apply) { b.CheckETPLocal(t, apply) }},
	{name: "UDPEndpointRemoved/with conntrack cleanup", cleanup: true, run: func(b *Bed, t *testing.T, apply Apply) {
		b.CheckUDPFlowAfterRemoval(t, b.VIP(), apply, true)
	}},
	// The controls: without cleanup the kernel keeps the stale DNAT,
	// which shows the checks can see the difference.
	{name: "UDPEndpointRemoved/control without cleanup", run: func(b *Bed, t *testing.T, apply Apply) {
		b.CheckUDPFlowAfterRemoval(t, b.VIP(), apply, false)
	}},
	{name: "UDPTargetPortChanged/with conntrack cleanup", cleanup: true, run: func(b *Bed, t *testing.T, apply Apply) {
		b.CheckUDPFlowAfterTargetPortChange(t, b.VIP(), apply, true)
	}},
	{name: "UDPTargetPortChanged/control without cleanup", run: func(b *Bed, t *testing.T, apply Apply) {
		b.CheckUDPFlowAfterTargetPortChange(t, b.VIP(), apply, false)
	}},
	{name: "DualStackService", dualStackOnly: true, run: func(b *Bed, t *testing.T, apply Apply) { b.CheckDualStackService(t, apply) }},
}

// RunFamilyChecks runs every family check over Families, each on a fresh
// bed from newBed, as subtests "<check>/<family>": ClusterIP spread and
// NodePort, ClientIP affinity, externalTrafficPolicy Local, refusal
// without endpoints (TCP and UDP), UDP conntrack cleanup after an
// endpoint goes or its target port moves (each with its control), and,
// on the dual-stack bed, one service with a cluster IP of each family.
func RunFamilyChecks(t *testing.T, newBed ModeBed) {
	t.Helper()
	for _, c := range familyChecks {
		fams := Families
		if c.dualStackOnly {
			fams = []dataplane.Family{dataplane.IPv6}
		}
		for _, f := range fams {
			name := f.String()
			if c.dualStackOnly {
				name = "dual-stack"
			}
			t.Run(c.name+"/"+name, func(t *testing.T) {
				b, apply := newBed(t, f, c.cleanup)
				c.run(b, t, apply)
			})
		}
	}
}
