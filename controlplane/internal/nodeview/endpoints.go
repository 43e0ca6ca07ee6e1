package nodeview

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// candidate is one endpoint offered for one service port: the endpoint and
// the target port its slice gives for that service port.
type candidate struct {
	ep   *model.Endpoint
	port uint16
}

// merged is a service's EndpointSlices merged, per service port, the way
// kube-proxy's EndpointSliceCache merges them.
type merged struct {
	// byPort[i] are the candidates for svc.Ports[i], one per address and
	// target port, sorted by address, then port.
	byPort [][]candidate
	// hasAnyByPort[i]: some candidate of svc.Ports[i] is ready, or
	// serving and terminating (upstream's hasAnyEndpoints, per port).
	hasAnyByPort []bool
	// hasAny: hasAnyByPort holds a true (the view's service-wide bit).
	hasAny bool
}

// mergeSlices merges the slices of svc.
//
//   - Only slices of the service whose family is one of the service's
//     cluster IP families are used; slices of another service are ignored.
//   - An endpoint is a candidate for service port P only if its slice has a
//     port with P's name and protocol; that port's number is the target
//     port (this is how named target ports resolve).
//   - An endpoint is its address and target port, as upstream's
//     (Endpoint.String() is "ip:port"): one address that two slices give
//     two target ports for one service port is two candidates.
//   - The same address and target port may appear in several slices (an
//     endpoint moving between slices, or a pod IP reused before the old
//     pod is gone). Per service port one entry is kept: a non-terminating
//     entry beats a terminating one (as upstream), then a ready one beats a
//     non-ready one, then the first in slice-name order wins, so the result
//     never depends on map order.
func mergeSlices(svc *model.Service, all map[model.SliceKey]*model.EndpointSlice) merged {
	used := usableSlices(svc, all)
	m := merged{byPort: make([][]candidate, len(svc.Ports)), hasAnyByPort: make([]bool, len(svc.Ports))}
	if len(used) == 0 {
		return m
	}
	seen := map[netip.AddrPort]int{}
	for i, p := range svc.Ports {
		clear(seen)
		var cands []candidate
		for _, s := range used {
			target, ok := targetPort(s, p)
			if !ok {
				continue
			}
			for j := range s.Endpoints {
				ep := &s.Endpoints[j]
				id := netip.AddrPortFrom(ep.Address, target)
				if k, dup := seen[id]; dup {
					if rank(ep) > rank(cands[k].ep) {
						cands[k] = candidate{ep: ep, port: target}
					}
					continue
				}
				seen[id] = len(cands)
				cands = append(cands, candidate{ep: ep, port: target})
			}
		}
		slices.SortFunc(cands, compareCandidates)
		m.byPort[i] = cands
		m.hasAnyByPort[i] = slices.ContainsFunc(cands, func(c candidate) bool { return usable(c.ep) })
		m.hasAny = m.hasAny || m.hasAnyByPort[i]
	}
	return m
}

// compareCandidates orders one port's candidates by address, then target
// port.
func compareCandidates(a, b candidate) int {
	return cmp.Or(a.ep.Address.Compare(b.ep.Address), cmp.Compare(a.port, b.port))
}

// usableSlices returns the service's slices of a matching family, sorted by
// slice key so that merging is deterministic.
func usableSlices(svc *model.Service, all map[model.SliceKey]*model.EndpointSlice) []*model.EndpointSlice {
	var v4, v6 bool
	for _, ip := range svc.ClusterIPs {
		if ip.Is4() {
			v4 = true
		} else if ip.Is6() {
			v6 = true
		}
	}
	used := make([]*model.EndpointSlice, 0, len(all))
	for _, s := range all {
		if s == nil || s.Service != svc.Key {
			continue
		}
		if (s.Family == model.IPv4 && v4) || (s.Family == model.IPv6 && v6) {
			used = append(used, s)
		}
	}
	slices.SortFunc(used, func(a, b *model.EndpointSlice) int {
		return cmp.Or(cmp.Compare(a.Key.Namespace, b.Key.Namespace), cmp.Compare(a.Key.Name, b.Key.Name))
	})
	return used
}

// targetPort returns the target port a slice gives for a service port.
func targetPort(s *model.EndpointSlice, p model.ServicePort) (uint16, bool) {
	for _, sp := range s.Ports {
		if sp.Name == p.Name && sp.Protocol == p.Protocol {
			return sp.Port, true
		}
	}
	return 0, false
}

// usable reports whether some traffic may go to ep: it is ready, or it is
// serving and terminating (the fallback when nothing is ready).
func usable(ep *model.Endpoint) bool {
	return ep.Ready || (ep.Serving && ep.Terminating)
}

// rank orders duplicates of one address: non-terminating first, then ready.
func rank(ep *model.Endpoint) int {
	r := 0
	if !ep.Terminating {
		r += 2
	}
	if ep.Ready {
		r++
	}
	return r
}
