package explain

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Packet is the first packet of a connection: what Explain and every
// tracer are asked about.
type Packet struct {
	Protocol dataplane.Protocol
	Src, Dst netip.Addr
	// Port is the destination port.
	Port uint16
	// SrcPort is the client's port, 0 when not given: only a hashed
	// algorithm (maglev) needs it to name the one endpoint.
	SrcPort uint16
}

// ParsePacket reads the form String writes: "tcp 10.0.0.1 -> 10.96.0.1:80"
// ("[fd00::1]:80" for IPv6 destinations), the source with its port when
// it has one ("10.0.0.1:40000", "[fd00::1]:40000").
func ParsePacket(s string) (Packet, error) {
	f := strings.Fields(s)
	if len(f) != 4 || f[2] != "->" {
		return Packet{}, fmt.Errorf("packet %q: want \"PROTO SRC -> DST:PORT\"", s)
	}
	var srcPort uint16
	src, err := netip.ParseAddr(f[1])
	if err != nil {
		ap, err2 := netip.ParseAddrPort(f[1])
		if err2 != nil || ap.Port() == 0 {
			return Packet{}, fmt.Errorf("packet %q: source: %w", s, err)
		}
		src, srcPort = ap.Addr(), ap.Port()
	}
	dst, err := netip.ParseAddrPort(f[3])
	if err != nil {
		return Packet{}, fmt.Errorf("packet %q: destination: %w", s, err)
	}
	proto, err := dataplane.ParseProtocol(f[0])
	if err != nil {
		return Packet{}, err
	}
	p := Packet{Protocol: proto, Src: src.Unmap(), Dst: dst.Addr().Unmap(), Port: dst.Port(), SrcPort: srcPort}
	return p, p.Validate()
}

// Validate reports a packet no node could see: an unknown protocol, a
// missing or zoned address, families that differ, port 0.
func (p Packet) Validate() error {
	switch {
	case p.Protocol != dataplane.TCP && p.Protocol != dataplane.UDP && p.Protocol != dataplane.SCTP:
		return fmt.Errorf("protocol %q: want tcp, udp or sctp", p.Protocol)
	case !p.Src.IsValid() || !p.Dst.IsValid():
		return fmt.Errorf("source and destination addresses are required")
	case p.Src.Zone() != "" || p.Dst.Zone() != "":
		return fmt.Errorf("addresses with a zone are never a service's")
	case p.Src.Unmap().Is4() != p.Dst.Unmap().Is4():
		return fmt.Errorf("source %s and destination %s are of different families", p.Src, p.Dst)
	case p.Port == 0:
		return fmt.Errorf("destination port 0")
	}
	return nil
}

// IPv6 reports whether the packet is an IPv6 one.
func (p Packet) IPv6() bool { return !p.Dst.Unmap().Is4() }

func (p Packet) String() string {
	src := p.Src.String()
	if p.SrcPort != 0 {
		src = netip.AddrPortFrom(p.Src, p.SrcPort).String()
	}
	return fmt.Sprintf("%s %s -> %s", p.Protocol, src, netip.AddrPortFrom(p.Dst, p.Port))
}
