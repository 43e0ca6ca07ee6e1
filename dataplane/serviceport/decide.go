package serviceport

import switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"

// Verdict is what a port does with traffic no endpoint takes.
type Verdict uint8

const (
	// Reject refuses at once (a TCP reset, an ICMP error): the port has
	// no endpoint anywhere in the cluster, so a client waiting for a
	// timeout would wait for nothing. The zero Verdict, so an undecided
	// port fails loudly rather than hangs.
	Reject Verdict = iota
	// Drop discards silently: the port has endpoints, only none for
	// this traffic on this node (a Local policy). The failure is the
	// node's, not the service's, so kube-proxy drops and leaves it to
	// retries and load-balancer health checks to find a node with one.
	Drop
)

func (v Verdict) String() string {
	if v == Drop {
		return "drop"
	}
	return "reject"
}

// Traffic is what one kind of a port's traffic does on this node.
// Internal traffic is addressed to the cluster IPs; external traffic to
// the node port, the external IPs and the load-balancer IPs.
type Traffic struct {
	// Endpoints take the traffic, balanced; when empty, NoEndpoints
	// applies.
	Endpoints []Endpoint
	// Local: the traffic is under a Local policy, so Endpoints is the
	// port's Local set (and the client is not masqueraded).
	Local bool
	// NoEndpoints is the verdict for this traffic when Endpoints is
	// empty (set whatever Endpoints holds, so tests can see it).
	NoEndpoints Verdict
}

// Serves reports whether some endpoint takes the traffic.
func (t Traffic) Serves() bool { return len(t.Endpoints) > 0 }

// policy is the part of a view the decision reads besides the port.
type policy struct {
	intLocal, extLocal bool
	// hasAny is the view's service-wide has_any_endpoints, the fallback
	// for a port the control plane did not decide (an older one).
	hasAny bool
}

func policyOf(sv *switchyardv1.ServiceView) policy {
	return policy{
		intLocal: sv.GetInternalTrafficPolicy() == switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
		extLocal: sv.GetExternalTrafficPolicy() == switchyardv1.TrafficPolicy_TRAFFIC_POLICY_LOCAL,
		hasAny:   sv.GetHasAnyEndpoints(),
	}
}

// decide fills p's Internal, External and ShortCircuit from its endpoint
// sets, addresses and the view's policies: the one place every mode's
// rules come from, as kube-proxy's CategorizeEndpoints and the per-port
// rules of its proxiers are for its modes.
//
//   - Internal traffic goes to the Local set under internalTrafficPolicy
//     Local, else to the Cluster set; external traffic likewise by
//     externalTrafficPolicy. A port with no node port, external or
//     load-balancer IP has no external traffic: External stays zero.
//   - With no endpoint for it, traffic is rejected when the port has no
//     endpoint anywhere and dropped otherwise. That is decided per port
//     (ServicePort.has_any_endpoints): a port whose EndpointSlices list
//     no endpoint is refused while the service's other ports serve. Only
//     a view without the per-port answer falls back to the view's.
//   - ShortCircuit: under an external Local policy, traffic from the
//     node and its pods to the external addresses is not subject to the
//     policy and goes to the Cluster set, whenever there is one (upstream's
//     usesExternalTrafficChain); what is left meets External's verdict.
func (p *Port) decide(sp *switchyardv1.ServicePort, pol policy) {
	hasAny := pol.hasAny
	if sp.HasAnyEndpoints != nil {
		hasAny = sp.GetHasAnyEndpoints()
	}
	verdict := Reject
	if hasAny {
		verdict = Drop
	}
	p.Internal = Traffic{Endpoints: p.Cluster, NoEndpoints: verdict}
	if pol.intLocal {
		p.Internal.Endpoints, p.Internal.Local = p.Local, true
	}
	p.External, p.ShortCircuit = Traffic{}, false
	if p.NodePort == 0 && len(p.ExternalIPs) == 0 && len(p.LBIPs) == 0 {
		return
	}
	p.External = Traffic{Endpoints: p.Cluster, NoEndpoints: verdict}
	if pol.extLocal {
		p.External.Endpoints, p.External.Local = p.Local, true
		p.ShortCircuit = len(p.Cluster) > 0
	}
}

// UsesLocal reports whether some traffic is balanced over the Local set,
// so the port needs its local chain.
func (p *Port) UsesLocal() bool {
	return (p.Internal.Local && p.Internal.Serves()) || (p.External.Local && p.External.Serves())
}

// UsesExternal reports whether the external addresses enter the port's
// external chain: some endpoint takes external traffic, or node and pod
// traffic is short-circuited to the Cluster set.
func (p *Port) UsesExternal() bool { return p.External.Serves() || p.ShortCircuit }
