package scenario

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// IPv6 runs a tracer on IPv6: every IPv4 address and prefix of the
// node's state and of the packets moves into fd00::/96 (a.b.c.d to
// fd00::a.b.c.d, a /n to a /96+n) and the endpoints of the verdicts move
// back, so the IPv4 table of expectations checks the same services
// programmed as IPv6 (ip6tables, the ip6 table, IPv6 ipsets and virtual
// servers). The scenario files stay IPv4 only, so one set of
// expectations serves both families, and every mode mirrors the same
// way. The prefix is a unique local one, private as the files'
// 10.0.0.0/8 is.
func IPv6(tr Tracer) Tracer { return ipv6Tracer{tr} }

type ipv6Tracer struct{ tr Tracer }

func (s ipv6Tracer) Mode() string { return s.tr.Mode() }

func (s ipv6Tracer) Apply(t testing.TB, st *dataplane.State) {
	t.Helper()
	six := &dataplane.State{Config: to6Proto(st.Config), Services: map[string]*switchyardv1.ServiceView{}}
	for n, sv := range st.Services {
		six.Services[n] = to6Proto(sv)
	}
	s.tr.Apply(t, six)
}

func (s ipv6Tracer) Trace(t testing.TB, pkt explain.Packet) explain.Verdict {
	t.Helper()
	pkt.Src, pkt.Dst = to6(pkt.Src), to6(pkt.Dst)
	v := s.tr.Trace(t, pkt)
	for i, sh := range v.Endpoints {
		v.Endpoints[i].Endpoint = netip.AddrPortFrom(to4(sh.Endpoint.Addr()), sh.Endpoint.Port())
	}
	v.Endpoints = explain.SortShares(v.Endpoints)
	return v
}

// mirrorPrefix is the /96 IPv4 addresses move into.
var mirrorPrefix = netip.MustParsePrefix("fd00::/96")

// loopback4 and loopback6 mirror each other: IPv6 has one loopback
// address, and what a mode does with loopback is the point of a packet
// addressed to it.
var loopback4, loopback6 = netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()

func to6(a netip.Addr) netip.Addr {
	if a == loopback4 {
		return loopback6
	}
	if !a.Is4() {
		return a
	}
	b := mirrorPrefix.Addr().As16()
	v4 := a.As4()
	copy(b[12:], v4[:])
	return netip.AddrFrom16(b)
}

func to4(a netip.Addr) netip.Addr {
	if a == loopback6 {
		return loopback4
	}
	if !a.Is6() || !mirrorPrefix.Contains(a) {
		return a
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:]))
}

// to6String moves an address or a prefix; any other string stays.
func to6String(s string) string {
	if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
		return to6(a).String()
	}
	if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
		return netip.PrefixFrom(to6(p.Addr()), 96+p.Bits()).String()
	}
	return s
}

// to6Proto returns a copy of m with every string field (and string list
// element) that is an IPv4 address or prefix moved; nil stays nil.
func to6Proto[M proto.Message](m M) M {
	c := proto.Clone(m).(M)
	if c.ProtoReflect().IsValid() {
		to6Message(c.ProtoReflect())
	}
	return c
}

func to6Message(m protoreflect.Message) {
	type field struct {
		fd protoreflect.FieldDescriptor
		v  protoreflect.Value
	}
	var fields []field
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fields = append(fields, field{fd, v})
		return true
	})
	for _, f := range fields {
		switch {
		case f.fd.IsMap():
			// No map of the views or the NodeConfig holds addresses.
		case f.fd.IsList():
			l := f.v.List()
			for i := range l.Len() {
				switch f.fd.Kind() {
				case protoreflect.StringKind:
					l.Set(i, protoreflect.ValueOfString(to6String(l.Get(i).String())))
				case protoreflect.MessageKind:
					to6Message(l.Get(i).Message())
				}
			}
		case f.fd.Kind() == protoreflect.StringKind:
			m.Set(f.fd, protoreflect.ValueOfString(to6String(f.v.String())))
		case f.fd.Kind() == protoreflect.MessageKind:
			to6Message(f.v.Message())
		}
	}
}
