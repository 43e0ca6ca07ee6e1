package dataplane

import (
	"fmt"
	"strings"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Protocol is a service port's transport protocol, valued as its IP
// protocol number: what IPVS's netlink API and conntrack carry, so no
// mode translates it again. The zero value is no protocol.
type Protocol uint8

// The protocols a Service port can have.
const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

// String is the lower-case spelling iptables, nft, ipset, the Go net
// package and Explain's packets use ("tcp").
func (p Protocol) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// Upper is the spelling of ipvsadm and the Kubernetes API ("TCP").
func (p Protocol) Upper() string { return strings.ToUpper(p.String()) }

// ProtocolOf reads the wire enum; ok is false for one no mode programs
// (unspecified, or a value newer than this agent).
func ProtocolOf(w switchyardv1.Protocol) (p Protocol, ok bool) {
	switch w {
	case switchyardv1.Protocol_PROTOCOL_TCP:
		return TCP, true
	case switchyardv1.Protocol_PROTOCOL_UDP:
		return UDP, true
	case switchyardv1.Protocol_PROTOCOL_SCTP:
		return SCTP, true
	}
	return 0, false
}

// ParseProtocol reads "tcp", "udp" or "sctp" in any case, as people and
// grpcurl requests spell them.
func ParseProtocol(s string) (Protocol, error) {
	s = strings.ToLower(s)
	switch s {
	case "tcp":
		return TCP, nil
	case "udp":
		return UDP, nil
	case "sctp":
		return SCTP, nil
	}
	return 0, fmt.Errorf("protocol %q: want tcp, udp or sctp", s)
}
