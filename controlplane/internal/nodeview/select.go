package nodeview

import (
	"slices"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// policies reports which endpoint sets a service's view carries, as
// upstream's ServicePort.UsesClusterEndpoints and UsesLocalEndpoints decide
// which sets CategorizeEndpoints computes, within the switchyard.v1
// contract:
//   - the cluster set when internal traffic is under the Cluster policy,
//     or external traffic is, for an externally reachable service;
//   - the local set when internal traffic is under the Local policy, or
//     external traffic is, for an externally reachable service.
//
// The model already sets ExternalPolicy to Cluster for a service that is
// not externally reachable, so the reachability test is what keeps an
// internal-Local ClusterIP service from carrying a cluster set.
//
// One difference from upstream, by contract: upstream also computes the
// cluster set when both policies are Local and the service is externally
// reachable, to short-circuit pod- and host-originated traffic to the
// external addresses; switchyard.v1 routes all traffic by the two policies
// (service_view.proto), so that set would never be read and is not sent.
func policies(svc *model.Service) (usesCluster, usesLocal bool) {
	itpLocal := svc.InternalPolicy == model.PolicyLocal
	etpLocal := svc.ExternalPolicy == model.PolicyLocal
	external := externallyReachable(svc)
	// As upstream's UsesClusterEndpoints: an externally reachable service
	// always has a cluster set, even when both policies are Local, so that
	// traffic from pods and the node to its external addresses can be
	// short-circuited to all endpoints.
	return !itpLocal || external, itpLocal || (external && etpLocal)
}

// externallyReachable reports whether the service takes traffic other
// than on its cluster IPs, as upstream's ServicePort.ExternallyAccessible:
// a node port, an external IP or a load-balancer IP. Upstream decides per
// service port; a view has one pair of sets, so here any port with a node
// port counts (all ports of a NodePort or LoadBalancer service have one,
// unless allocateLoadBalancerNodePorts is false).
func externallyReachable(svc *model.Service) bool {
	if len(svc.ExternalIPs) > 0 || len(svc.LoadBalancerIPs) > 0 {
		return true
	}
	for _, p := range svc.Ports {
		if p.NodePort != 0 {
			return true
		}
	}
	return false
}

// place is where a view is computed for: a node name and its zone. The zero
// place is "a node that hosts no endpoint, is named by no hint and has no
// zone": the context of every service's Default view.
type place struct {
	node string
	zone string
}

// hosts reports whether ep runs on the place's node.
func (p place) hosts(ep *model.Endpoint) bool {
	return p.node != "" && ep.NodeName == p.node
}

// topology is the mode in which hints restrict the cluster set.
type topology uint8

const (
	topologyNone topology = iota
	topologySameZone
	topologySameNode
)

// topologyFor decides, as upstream kube-proxy's topologyModeFromHints does,
// whether hints apply to one service port at a place. Only ready endpoints
// are considered:
//   - node hints apply when every ready endpoint has one and at least one
//     names this node (PreferSameTrafficDistribution, on by default since
//     Kubernetes 1.34 and locked on in 1.35);
//   - otherwise zone hints apply when every ready endpoint has one and at
//     least one names this node's zone;
//   - otherwise no topology: every endpoint is used.
//
// The service's trafficDistribution field itself is not consulted, as in
// upstream: the EndpointSlice controller turns it into hints.
func topologyFor(cands []candidate, p place) topology {
	hasReady := false
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, c := range cands {
		ep := c.ep
		if !ep.Ready {
			continue
		}
		hasReady = true
		if len(ep.HintNodes) == 0 {
			allNode = false
		} else if p.node != "" && slices.Contains(ep.HintNodes, p.node) {
			forNode = true
		}
		if len(ep.HintZones) == 0 {
			allZone = false
		} else if p.zone != "" && slices.Contains(ep.HintZones, p.zone) {
			forZone = true
		}
	}
	switch {
	case !hasReady:
		return topologyNone
	case allNode && forNode:
		return topologySameNode
	case allZone && forZone:
		return topologySameZone
	}
	return topologyNone
}

// inTopology reports whether ep may serve the place under mode. There is
// no fallback here: falling back is decided when choosing the mode.
func inTopology(ep *model.Endpoint, mode topology, p place) bool {
	switch mode {
	case topologySameNode:
		return slices.Contains(ep.HintNodes, p.node)
	case topologySameZone:
		return slices.Contains(ep.HintZones, p.zone)
	}
	return true
}

// clusterSet chooses one port's endpoints for traffic under the Cluster
// policy: ready endpoints allowed by topology; when there are none,
// serving-terminating endpoints anywhere, without topology (KEP-1669:
// topology already fell back to all endpoints if any was ready).
func clusterSet(cands []candidate, p place, dst []candidate) []candidate {
	mode := topologyFor(cands, p)
	start := len(dst)
	for _, c := range cands {
		if c.ep.Ready && inTopology(c.ep, mode, p) {
			dst = append(dst, c)
		}
	}
	if len(dst) > start {
		return dst
	}
	for _, c := range cands {
		if c.ep.Serving && c.ep.Terminating {
			dst = append(dst, c)
		}
	}
	return dst
}

// localSet chooses one port's endpoints on the place's node: the ready
// ones, or when none is ready, the serving-terminating ones. Topology
// never applies to the local set.
func localSet(cands []candidate, p place, dst []candidate) []candidate {
	if p.node == "" {
		return dst
	}
	start := len(dst)
	for _, c := range cands {
		if c.ep.Ready && p.hosts(c.ep) {
			dst = append(dst, c)
		}
	}
	if len(dst) > start {
		return dst
	}
	for _, c := range cands {
		if c.ep.Serving && c.ep.Terminating && p.hosts(c.ep) {
			dst = append(dst, c)
		}
	}
	return dst
}
