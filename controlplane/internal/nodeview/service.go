package nodeview

import (
	"cmp"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ServiceViews is every variant of one service's view. A node receives
// ByNode[its name] if present, else ByZone[its zone] if present, else
// Default. ByZone and ByNode hold only the places whose view differs from
// the one they would otherwise get, so for most services both are nil and
// every node shares Default.
type ServiceViews struct {
	Key model.ServiceKey
	// Default is the view of a node that hosts none of the service's
	// endpoints, is named by no hint and whose zone is named by no hint.
	Default *View
	// ByZone holds views for zones named by topology hints.
	ByZone map[string]*View
	// ByNode holds views for nodes that host endpoints of a service with a
	// Local policy, or are named by node hints.
	ByNode map[string]*View
	// Nodes lists, sorted, the node names whose zone the computation read
	// (candidates for ByNode, kept or not). A zone change of one of them,
	// or its appearance or removal, requires recomputing the service; any
	// other node change does not.
	Nodes []string

	// zoned: zone hints may apply, so the views of the nodes in Nodes
	// depend on their zones. Without zone hints a node's zone is never
	// consulted, and a zone change needs no recomputation.
	zoned bool
}

// For returns the view node must program. A nil node, or a node the state
// does not know, gets the view of a zone-less node named by nothing.
func (s *ServiceViews) For(node *model.Node) *View {
	if node == nil {
		return s.Default
	}
	return s.at(node.Name, node.Zone)
}

func (s *ServiceViews) at(name, zone string) *View {
	if v, ok := s.ByNode[name]; ok {
		return v
	}
	return s.inherited(zone)
}

// inherited returns the view a node of that zone gets unless it has a
// view of its own.
func (s *ServiceViews) inherited(zone string) *View {
	if v, ok := s.ByZone[zone]; ok {
		return v
	}
	return s.Default
}

// Service computes all variants of one service's view from its
// EndpointSlices (keyed by slice; slices of other services are ignored)
// and the nodes, which are read only for the zones of nodes that need
// their own view. It is pure: the same input gives the same views, with
// the same versions, in every process. It returns nil for a nil service.
// A service without a load-balancing annotation gets no algorithm (each
// mode's default); an Index gives it the cluster's default.
func Service(svc *model.Service, epSlices map[model.SliceKey]*model.EndpointSlice, nodes map[string]*model.Node) *ServiceViews {
	return serviceViews(svc, epSlices, nodes, "")
}

// serviceViews is Service with balance the algorithm of a service whose
// annotation names none.
func serviceViews(svc *model.Service, epSlices map[model.SliceKey]*model.EndpointSlice, nodes map[string]*model.Node, balance string) *ServiceViews {
	if svc == nil {
		return nil
	}
	b := newBuilder(svc, mergeSlices(svc, epSlices), cmp.Or(svc.LoadBalancing, balance))
	out := &ServiceViews{Key: svc.Key, Default: b.view(place{})}
	zones := b.hintedZones()
	out.zoned = len(zones) > 0
	for _, zone := range zones {
		v := b.view(place{zone: zone})
		if v != out.Default {
			if out.ByZone == nil {
				out.ByZone = map[string]*View{}
			}
			out.ByZone[zone] = v
		}
	}
	out.Nodes = b.nodesOfInterest()
	for _, name := range out.Nodes {
		zone := ""
		if n := nodes[name]; n != nil {
			zone = n.Zone
		}
		v := b.view(place{node: name, zone: zone})
		if v != out.at("", zone) {
			if out.ByNode == nil {
				out.ByNode = map[string]*View{}
			}
			out.ByNode[name] = v
		}
	}
	return out
}

// builder builds the variants of one service's view.
type builder struct {
	svc  *model.Service
	name string
	m    merged
	// usesCluster: some traffic is under the Cluster policy, so the view
	// carries a cluster set and topology applies (see policies).
	usesCluster bool
	// usesLocal: some traffic is under a Local policy, so the view
	// carries a local set and marks local endpoints.
	usesLocal bool
	// base holds the node-independent fields, shared by every variant.
	base *switchyardv1.ServiceView
	// seen dedupes variants by content, so equal variants are one View
	// (and can be compared by pointer).
	seen map[string]*View
	// portNames are the service port names, valid UTF-8.
	portNames []string
	// tables are the Maglev tables built so far, by content (maglev.go):
	// variants share the tables of sets they share.
	tables map[string]*switchyardv1.MaglevTable
	// Scratch space reused across variants.
	buf   []candidate
	picks []pick
}

func newBuilder(svc *model.Service, m merged, balance string) *builder {
	usesCluster, usesLocal := policies(svc)
	b := &builder{
		svc:         svc,
		name:        text(svc.Key.String()),
		m:           m,
		usesCluster: usesCluster,
		usesLocal:   usesLocal,
		base:        baseView(svc, m),
		portNames:   portNames(svc),
		seen:        map[string]*View{},
	}
	b.base.LoadBalancing = loadBalancing(balance)
	return b
}

// view builds, or finds, the view at one place.
func (b *builder) view(p place) *View {
	sv := &switchyardv1.ServiceView{
		Namespace:                     b.base.Namespace,
		Name:                          b.base.Name,
		Type:                          b.base.Type,
		ClusterIps:                    b.base.ClusterIps,
		ExternalIps:                   b.base.ExternalIps,
		LoadBalancerIps:               b.base.LoadBalancerIps,
		LoadBalancerSourceRanges:      b.base.LoadBalancerSourceRanges,
		Ports:                         b.base.Ports,
		SessionAffinity:               b.base.SessionAffinity,
		SessionAffinityTimeoutSeconds: b.base.SessionAffinityTimeoutSeconds,
		ExternalTrafficPolicy:         b.base.ExternalTrafficPolicy,
		InternalTrafficPolicy:         b.base.InternalTrafficPolicy,
		HealthCheckNodePort:           b.base.HealthCheckNodePort,
		HasAnyEndpoints:               b.base.HasAnyEndpoints,
		LoadBalancing:                 b.base.LoadBalancing,
	}
	if b.usesCluster {
		sv.ClusterEndpoints = b.endpoints(p, clusterSet)
	}
	if b.usesLocal {
		sv.LocalEndpoints = b.endpoints(p, localSet)
	}
	if hashed(sv.LoadBalancing) {
		sv.MaglevTables = b.maglevTables(sv)
	}
	v := newServiceResource(b.name, sv)
	if prev, ok := b.seen[v.Version]; ok {
		return prev
	}
	b.seen[v.Version] = v
	return v
}

// chooser picks one port's endpoints at a place, appending to dst.
type chooser func(cands []candidate, p place, dst []candidate) []candidate

// endpoints runs choose for every service port and lists each chosen
// address once, with exactly the ports it was chosen for, sorted by
// address; its ports are sorted by name. When an address was chosen for
// several ports from different slices, its conditions and topology come
// from the choice for the first of those ports by name.
//
// An endpoint is an address and a port, so one address may be chosen
// twice for one service port (two slices give it two target ports). A
// message lists a port name once, so the address then gets one message
// per choice: the first holds each port's lowest target port, the next
// the second lowest of the ports chosen twice, and so on.
//
// The messages of one set are allocated in a few arrays rather than one
// by one: they live and die together with the view.
func (b *builder) endpoints(p place, choose chooser) []*switchyardv1.Endpoint {
	picks := b.picks[:0]
	for i := range b.svc.Ports {
		b.buf = choose(b.m.byPort[i], p, b.buf[:0])
		for _, c := range b.buf {
			picks = append(picks, pick{candidate: c, port: i})
		}
	}
	b.picks = picks
	if len(picks) == 0 {
		return nil
	}
	slices.SortFunc(picks, func(x, y pick) int {
		return cmp.Or(x.ep.Address.Compare(y.ep.Address),
			strings.Compare(b.portNames[x.port], b.portNames[y.port]), cmp.Compare(x.candidate.port, y.candidate.port))
	})
	if numberRepeats(picks) {
		slices.SortFunc(picks, func(x, y pick) int {
			return cmp.Or(x.ep.Address.Compare(y.ep.Address), cmp.Compare(x.repeat, y.repeat),
				strings.Compare(b.portNames[x.port], b.portNames[y.port]))
		})
	}
	n := 1
	for k := 1; k < len(picks); k++ {
		if !picks[k].sameMessage(&picks[k-1]) {
			n++
		}
	}
	eps := make([]switchyardv1.Endpoint, n)
	out := make([]*switchyardv1.Endpoint, n)
	ports := make([]switchyardv1.EndpointPort, len(picks))
	portPtrs := make([]*switchyardv1.EndpointPort, len(picks))
	for k := range picks {
		ports[k].Name = b.portNames[picks[k].port]
		ports[k].Port = uint32(picks[k].candidate.port)
		portPtrs[k] = &ports[k]
	}
	for r, k := 0, 0; k < len(picks); r++ {
		end := k + 1
		for end < len(picks) && picks[end].sameMessage(&picks[k]) {
			end++
		}
		b.fillEndpoint(&eps[r], picks[k].ep, p)
		eps[r].Ports = portPtrs[k:end:end]
		out[r] = &eps[r]
		k = end
	}
	clear(picks)
	return out
}

// pick is a candidate chosen for the service port of index port.
type pick struct {
	candidate
	port int
	// repeat counts the earlier picks of the same address and service
	// port (other target ports): the pick goes in message repeat of its
	// address.
	repeat int
}

// sameMessage reports whether p and q go in one Endpoint message.
func (p *pick) sameMessage(q *pick) bool {
	return p.ep.Address == q.ep.Address && p.repeat == q.repeat
}

// numberRepeats sets repeat on picks sorted by address, port and target
// port, and reports whether any is non-zero (rare: the common case needs
// no second sort).
func numberRepeats(picks []pick) bool {
	repeated := false
	for k := 1; k < len(picks); k++ {
		if picks[k].ep.Address == picks[k-1].ep.Address && picks[k].port == picks[k-1].port {
			picks[k].repeat = picks[k-1].repeat + 1
			repeated = true
		}
	}
	return repeated
}

func (b *builder) fillEndpoint(dst *switchyardv1.Endpoint, ep *model.Endpoint, p place) {
	dst.Address = ep.Address.String()
	dst.Ready = ep.Ready
	dst.Serving = ep.Serving
	dst.Terminating = ep.Terminating
	dst.Zone = text(ep.Zone)
	dst.NodeName = text(ep.NodeName)
	dst.IsLocal = b.usesLocal && p.hosts(ep)
}

// hintedZones lists, sorted, the zones named by hints of ready candidates,
// when topology can apply (the view has a cluster set).
func (b *builder) hintedZones() []string {
	if !b.usesCluster {
		return nil
	}
	var zones []string
	for _, cands := range b.m.byPort {
		for _, c := range cands {
			if c.ep.Ready {
				zones = append(zones, c.ep.HintZones...)
			}
		}
	}
	return sortedNonEmpty(zones)
}

// nodesOfInterest lists, sorted, the nodes whose view may differ from
// their zone's: nodes hosting usable endpoints when a Local policy is in
// use, and nodes named by node hints when topology can apply (the view
// has a cluster set).
func (b *builder) nodesOfInterest() []string {
	var names []string
	for _, cands := range b.m.byPort {
		for _, c := range cands {
			ep := c.ep
			if b.usesLocal && usable(ep) {
				names = append(names, ep.NodeName)
			}
			if b.usesCluster && ep.Ready {
				names = append(names, ep.HintNodes...)
			}
		}
	}
	return sortedNonEmpty(names)
}

func portNames(svc *model.Service) []string {
	names := make([]string, len(svc.Ports))
	for i, p := range svc.Ports {
		names[i] = text(p.Name)
	}
	return names
}

func sortedNonEmpty(s []string) []string {
	s = slices.DeleteFunc(s, func(x string) bool { return x == "" })
	if len(s) == 0 {
		return nil
	}
	slices.Sort(s)
	return slices.Compact(s)
}
