package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestScenarios runs the shared scenarios over this mode's rules: each
// step applied to knftables Fakes, each expected packet traced through
// what they hold.
func TestScenarios(t *testing.T) {
	scenario.Run(t, func(t *testing.T) scenario.Tracer { return newScenarioBed(t) })
}

// TestScenariosIPv6 runs the same scenarios with every IPv4 address and
// prefix moved into 64:ff9b::/96, so the ip6 table is traced against the
// same expectations (the verdict's endpoints are moved back).
func TestScenariosIPv6(t *testing.T) {
	scenario.Run(t, func(t *testing.T) scenario.Tracer { return &mirrored{newScenarioBed(t)} })
}

// scenarioBed is a Dataplane over Fakes of both families, applied as an
// agent applies: a full first sync, then partial syncs naming the
// services that changed.
type scenarioBed struct {
	bed   *fakeBed
	prev  *dataplane.State
	local []netip.Addr
}

func newScenarioBed(t testing.TB) *scenarioBed {
	return &scenarioBed{bed: newFakeBed(t, IPv4, IPv6)}
}

func (s *scenarioBed) Mode() string { return explain.ModeNFTables }

func (s *scenarioBed) Apply(t testing.TB, st *dataplane.State) {
	t.Helper()
	opts := dataplane.ApplyOptions{Full: s.prev == nil}
	if s.prev != nil {
		opts.Changed = changedServices(s.prev, st)
	}
	if err := s.bed.dp.Apply(t.Context(), st, opts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if stats := s.bed.dp.LastSync(); s.prev != nil && stats.Full {
		t.Errorf("a later step ran a full sync, want a partial one: %+v", stats)
	}
	// The agent sends partial syncs over netlink (Config.PartialNetlink);
	// this bed has no dialer, so the same planned transaction runs in the
	// Fakes. Check it landed: each table is what a fresh load of st makes.
	for fam, fake := range s.bed.fakes {
		if got, want := sortedDump(fake), freshDump(t, st, fam, s.bed.dp); got != want {
			t.Errorf("%s table after the sync differs from a fresh load of the same state:\n%s", fam, lineDiff(got, want))
		}
	}
	s.local = s.local[:0]
	for _, a := range st.Config.GetNodeIps() {
		if ip, err := netip.ParseAddr(a); err == nil {
			s.local = append(s.local, ip.Unmap())
		}
	}
	s.prev = st
}

func (s *scenarioBed) Trace(t testing.TB, pkt explain.Packet) explain.Verdict {
	t.Helper()
	fam := IPv4
	if pkt.IPv6() {
		fam = IPv6
	}
	mark, err := strconv.ParseUint(masqMark, 0, 32)
	if err != nil {
		t.Fatalf("masqMark %q: %v", masqMark, err)
	}
	tr := nftablestest.Tracer{Fake: s.bed.fakes[fam], Local: s.local, HairpinSet: setHairpin, MasqMark: uint32(mark)}
	v, err := tr.Trace(pkt)
	if err != nil {
		t.Errorf("%v", err)
		return explain.Verdict{Action: "trace-error", Notes: []string{err.Error()}, Path: v.Path}
	}
	t.Logf("%s: %s\n  path: %s", pkt, v, strings.Join(v.Path, " > "))
	return v
}

// lineDiff lists the lines only one of two sorted dumps holds.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}

// changedServices names the services added, removed or changed, as the
// agent's hint does.
func changedServices(prev, next *dataplane.State) map[string]struct{} {
	out := map[string]struct{}{}
	for k, sv := range next.Services {
		if !proto.Equal(prev.Services[k], sv) {
			out[k] = struct{}{}
		}
	}
	for k := range prev.Services {
		if _, ok := next.Services[k]; !ok {
			out[k] = struct{}{}
		}
	}
	return out
}

// mirrored runs a scenario in IPv6: states and packets are moved into
// 64:ff9b::/96 (a prefix grows by 96 bits: /16 becomes /112), and
// the endpoints of a verdict moved back to compare with the scenario.
type mirrored struct{ *scenarioBed }

func (m *mirrored) Apply(t testing.TB, st *dataplane.State) {
	t.Helper()
	six := &dataplane.State{Config: mirror(st.Config), Services: map[string]*switchyardv1.ServiceView{}}
	for k, sv := range st.Services {
		six.Services[k] = mirror(sv)
	}
	m.scenarioBed.Apply(t, six)
}

func (m *mirrored) Trace(t testing.TB, pkt explain.Packet) explain.Verdict {
	t.Helper()
	pkt.Src, pkt.Dst = to6(pkt.Src), to6(pkt.Dst)
	v := m.scenarioBed.Trace(t, pkt)
	for i, sh := range v.Endpoints {
		v.Endpoints[i].Endpoint = netip.AddrPortFrom(to4(sh.Endpoint.Addr()), sh.Endpoint.Port())
	}
	v.Endpoints = explain.SortShares(v.Endpoints)
	return v
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

func to6(a netip.Addr) netip.Addr {
	if !a.Is4() {
		return a
	}
	b, v4 := nat64.Addr().As16(), a.As4()
	copy(b[12:], v4[:])
	return netip.AddrFrom16(b)
}

func to4(a netip.Addr) netip.Addr {
	if !nat64.Contains(a) {
		return a
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:]))
}

// mirror is a copy of m with every IPv4 address or prefix held in a
// string field moved into 64:ff9b::/96.
func mirror[M proto.Message](m M) M {
	c := proto.Clone(m).(M)
	mirrorFields(c.ProtoReflect())
	return c
}

func mirrorFields(m protoreflect.Message) {
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	for _, fd := range fields {
		v := m.Get(fd)
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			l := v.List()
			for i := range l.Len() {
				l.Set(i, protoreflect.ValueOfString(mirrorString(l.Get(i).String())))
			}
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := range l.Len() {
				mirrorFields(l.Get(i).Message())
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(mirrorString(v.String())))
		case fd.Kind() == protoreflect.MessageKind:
			mirrorFields(v.Message())
		}
	}
}

func mirrorString(s string) string {
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return to6(a).String()
	}
	if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
		return netip.PrefixFrom(to6(p.Addr()), p.Bits()+96).String()
	}
	return s
}

// TestTraceAgreesWithExplainer traces, for every golden input, packets
// to each service's addresses and node ports (served and unserved
// ports) from a pod, the node, loopback, an endpoint, an allowed source
// and a client elsewhere, and compares each verdict with the
// explainer's for this mode. One Dataplane goes through the inputs in
// order and back, so every input but the first is a partial sync from
// another one (Apply checks it lands as a fresh load would).
func TestTraceAgreesWithExplainer(t *testing.T) {
	views := dataplanetest.Views()
	back := slices.Clone(views)
	slices.Reverse(back)
	s := newScenarioBed(t)
	for i, name := range slices.Concat(views, back[1:]) {
		t.Run(fmt.Sprintf("%02d-%s", i, name), func(t *testing.T) {
			st := dataplanetest.LoadState(t, name)
			s.Apply(t, st)
			for _, pkt := range probes(st) {
				want := explain.Explain(st, explain.ModeNFTables, pkt)
				got := s.Trace(t, pkt)
				if d := explain.Diff(want, got); len(d) > 0 {
					t.Errorf("%s: %s\n  explainer: %s %q\n  tracer:    %s\n  path: %s",
						pkt, strings.Join(d, "; "), want, want.Notes, got, strings.Join(got.Path, " > "))
				}
			}
		})
	}
}

// probes are the packets TestTraceAgreesWithExplainer traces for st.
func probes(st *dataplane.State) []explain.Packet {
	addrs := func(ss []string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, a.Unmap())
			}
		}
		return out
	}
	nodeIPs := addrs(st.Config.GetNodeIps())
	srcs := append(addrs([]string{"192.0.2.50", "2001:db8::50", "127.0.0.1", "::1"}), nodeIPs...)
	prefixes := func(ss []string) (out []netip.Addr) {
		for _, s := range ss {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p.Addr().Next().Next().Next().Next().Next())
			}
		}
		return out
	}
	srcs = append(srcs, prefixes(st.Config.GetClusterCidrs())...)
	type target struct {
		proto string
		dst   netip.Addr
		port  uint16
	}
	var targets []target
	for _, a := range prefixes(st.Config.GetServiceCidrs()) {
		targets = append(targets, target{"tcp", a, 80})
	}
	for _, sv := range st.Services {
		srcs = append(srcs, prefixes(sv.GetLoadBalancerSourceRanges())...)
		for _, ep := range sv.GetClusterEndpoints() {
			srcs = append(srcs, addrs([]string{ep.GetAddress()})...)
		}
		svcIPs := addrs(slices.Concat(sv.GetClusterIps(), sv.GetExternalIps(), sv.GetLoadBalancerIps()))
		for _, p := range sv.GetPorts() {
			proto := strings.ToLower(strings.TrimPrefix(p.GetProtocol().String(), "PROTOCOL_"))
			other := map[string]string{"tcp": "udp", "udp": "tcp", "sctp": "tcp"}[proto]
			port := uint16(p.GetPort())
			for _, a := range svcIPs {
				targets = append(targets, target{proto, a, port}, target{proto, a, port + 1}, target{other, a, port})
			}
			if np := uint16(p.GetNodePort()); np > 0 {
				for _, a := range append(addrs([]string{"127.0.0.1", "::1"}), nodeIPs...) {
					targets = append(targets, target{proto, a, np})
				}
			}
		}
	}
	var out []explain.Packet
	seen := map[string]bool{}
	for _, tg := range targets {
		for _, src := range srcs {
			pkt := explain.Packet{Protocol: tg.proto, Src: src, Dst: tg.dst, Port: tg.port}
			if pkt.Validate() != nil || seen[pkt.String()] {
				continue
			}
			seen[pkt.String()] = true
			out = append(out, pkt)
		}
	}
	slices.SortFunc(out, func(a, b explain.Packet) int { return strings.Compare(a.String(), b.String()) })
	return out
}
