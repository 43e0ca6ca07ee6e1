package explain

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
)

// Action is what a node does with a packet.
type Action string

const (
	// Forward: the destination is rewritten to one of the endpoints.
	Forward Action = "forward"
	// Reject: refused at once (a TCP reset or an ICMP error).
	Reject Action = "reject"
	// Drop: discarded silently.
	Drop Action = "drop"
	// Pass: no service rule touches it; the node routes it as any packet.
	Pass Action = "pass"
)

// Why names the rule of kube-proxy's semantics that decided a verdict.
type Why string

const (
	// WhyEndpoints: balanced over the port's endpoints for its traffic.
	WhyEndpoints Why = "endpoints"
	// WhyLocalEndpoints: a Local traffic policy keeps it on this node's
	// endpoints, and the client's address.
	WhyLocalEndpoints Why = "local-endpoints"
	// WhyShortCircuit: external Local policy, but traffic from the node
	// or its pods goes to every endpoint of the cluster (upstream's
	// short-circuit of node and pod traffic to external addresses).
	WhyShortCircuit Why = "short-circuit"
	// WhyNoEndpoints: the port has no endpoint anywhere: rejected.
	WhyNoEndpoints Why = "no-endpoints"
	// WhyNoneForNode: the port has endpoints, none for this traffic on
	// this node (a Local policy): dropped.
	WhyNoneForNode Why = "none-for-this-node"
	// WhySourceRange: a load-balancer IP whose source ranges do not hold
	// the client.
	WhySourceRange Why = "source-range"
	// WhyUnservedPort: a cluster IP on a port no service serves there
	// (nftables mode, as kube-proxy's).
	WhyUnservedPort Why = "unserved-port"
	// WhyServiceRange: an address of the cluster's Service ranges that no
	// service holds (nftables mode, as kube-proxy's).
	WhyServiceRange Why = "service-range"
	// WhyNotAService: no service has this address, port and protocol.
	WhyNotAService Why = "not-a-service"
)

// Share is one endpoint a forwarded packet may reach and the part of new
// connections it gets.
type Share struct {
	Endpoint netip.AddrPort
	Share    float64
}

// Verdict is what a node does with one packet. Tracers fill Action,
// Endpoints and Masquerade (and Path); the explainer fills every field.
type Verdict struct {
	Action Action
	// Endpoints are sorted by address and port; set for Forward only.
	Endpoints []Share
	// Masquerade: the endpoint sees the node's address, not the client's.
	Masquerade bool
	// AffinitySeconds is the ClientIP affinity timeout, 0 without.
	AffinitySeconds uint32

	// Service is "namespace/name" and Port the service port's name, of
	// the service whose rules decided; empty for Pass.
	Service, Port string
	// Address is what the destination is to that service: "cluster IP",
	// "external IP", "load-balancer IP" or "node port".
	Address string
	Why     Why
	// Notes qualify the answer: a terminating fallback, input the node
	// skips, a mode's own behaviour.
	Notes []string
	// Path is what a tracer walked (chains, maps, virtual servers).
	Path []string
}

// Even returns n endpoints with equal shares, sorted.
func Even(eps ...netip.AddrPort) []Share {
	out := make([]Share, 0, len(eps))
	for _, ep := range eps {
		out = append(out, Share{Endpoint: ep, Share: 1 / float64(len(eps))})
	}
	SortShares(out)
	return out
}

// SortShares sorts by endpoint and merges duplicates (a tracer reaching
// one endpoint by two paths).
func SortShares(s []Share) []Share {
	slices.SortFunc(s, func(a, b Share) int { return a.Endpoint.Compare(b.Endpoint) })
	out := s[:0]
	for _, sh := range s {
		if n := len(out); n > 0 && out[n-1].Endpoint == sh.Endpoint {
			out[n-1].Share += sh.Share
			continue
		}
		out = append(out, sh)
	}
	return out
}

// ShareTolerance is how far a share may differ from the expected one:
// modes divide by integers (nftables splits 65,536 slots, iptables prints
// ten decimals), never by more than this.
const ShareTolerance = 0.002

// Diff lists how got differs from want in what a packet does: the
// action, the endpoints and their shares, and for a forwarded packet
// masquerading and affinity. Explanations (Why, Notes, Path) are not
// compared. Empty when they agree.
func Diff(want, got Verdict) []string {
	var d []string
	if want.Action != got.Action {
		d = append(d, fmt.Sprintf("action: want %s, got %s", want.Action, got.Action))
	}
	if want.Action != Forward || got.Action != Forward {
		return d
	}
	if !sameShares(want.Endpoints, got.Endpoints) {
		d = append(d, fmt.Sprintf("endpoints: want %s, got %s", FormatShares(want.Endpoints), FormatShares(got.Endpoints)))
	}
	if want.Masquerade != got.Masquerade {
		d = append(d, fmt.Sprintf("masquerade: want %t, got %t", want.Masquerade, got.Masquerade))
	}
	if want.AffinitySeconds != got.AffinitySeconds {
		d = append(d, fmt.Sprintf("affinity: want %ds, got %ds", want.AffinitySeconds, got.AffinitySeconds))
	}
	return d
}

func sameShares(a, b []Share) bool {
	return slices.EqualFunc(a, b, func(x, y Share) bool {
		return x.Endpoint == y.Endpoint && math.Abs(x.Share-y.Share) <= ShareTolerance
	})
}

// FormatShares writes shares as "[10.0.0.1:80 50%, 10.0.0.2:80 50%]".
func FormatShares(s []Share) string {
	parts := make([]string, len(s))
	for i, sh := range s {
		parts[i] = fmt.Sprintf("%s %.1f%%", sh.Endpoint, 100*sh.Share)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// String is one line: "forward to [...] (masquerade)", "reject
// (no-endpoints)".
func (v Verdict) String() string {
	var b strings.Builder
	b.WriteString(string(v.Action))
	if v.Action == Forward {
		b.WriteString(" to " + FormatShares(v.Endpoints))
		if v.Masquerade {
			b.WriteString(" masqueraded")
		}
		if v.AffinitySeconds > 0 {
			fmt.Fprintf(&b, " affinity %ds", v.AffinitySeconds)
		}
	}
	if v.Service != "" {
		fmt.Fprintf(&b, " by %s", v.Service)
		if v.Port != "" {
			b.WriteString(":" + v.Port)
		}
		if v.Address != "" {
			b.WriteString(" " + v.Address)
		}
	}
	if v.Why != "" {
		fmt.Fprintf(&b, " (%s)", v.Why)
	}
	return b.String()
}
