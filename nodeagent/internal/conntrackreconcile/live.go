package conntrackreconcile

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Live reads what the node forwards in family fam from st, as mode
// programs it: every UDP service port (conntrack.UDPPort, the same
// reading the modes' change-based cleanup uses), the Service ranges, and
// the node addresses node ports answer on. Input the modes skip is
// skipped here too, silently: they report it.
func Live(st *dataplane.State, fam dataplane.Family, mode switchyardv1.DataplaneMode) conntrack.Live {
	skip := func(string, string) {}
	// Each mode's reading of an empty node_port_addresses, as it renders.
	npDefault := serviceport.NodePortsAll
	if mode == switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES {
		npDefault = serviceport.NodePortsPrimary
	}
	node := serviceport.ReadNode(st.Config, fam, npDefault, skip)
	live := conntrack.Live{ServiceCIDRs: node.ServiceCIDRs}
	// Only the node's own addresses: "all" and CIDRs name other nodes'
	// addresses too, and a flow from here to another node's node port
	// is not DNATed here.
	nodeIPs := node.NodeIPs
	np := node.NodePorts
	live.NodePortAddr = func(a netip.Addr) bool { return slices.Contains(nodeIPs, a) && np.Matches(a) }
	for key, sv := range st.Services {
		svc, ok := serviceport.Read(key, sv, fam, func(string, string) {})
		if !ok {
			continue
		}
		for i := range svc.Ports {
			// A port without an address of the family is another
			// family's: its node port is not served in this one.
			if u, ok := svc.Ports[i].UDPFlows(); ok && len(u.Dsts) > 0 {
				live.Ports = append(live.Ports, u)
			}
		}
	}
	return live
}

// Removed reports whether next, applied after prev, lost a UDP
// endpoint (address and target port) or a UDP service port that prev
// had, among the names in changed (nil: any name, as after a full
// sync). A TCP-only change leaves no entry worth a run. prev nil (the
// first sync) counts as a removal: nothing is known of before.
func Removed(prev, next *view.View, changed map[string]struct{}) bool {
	if prev == nil {
		return true
	}
	if changed == nil {
		for name := range prev.Resources {
			if removedFrom(prev.Resources[name].GetService(), next.Resources[name].GetService()) {
				return true
			}
		}
		return false
	}
	for name := range changed {
		if removedFrom(prev.Resources[name].GetService(), next.Resources[name].GetService()) {
			return true
		}
	}
	return false
}

// removedFrom reports whether cur (nil: deleted) lacks a UDP port or a
// UDP endpoint of old.
func removedFrom(old, cur *switchyardv1.ServiceView) bool {
	have := udpEndpoints(cur)
	for name, eps := range udpEndpoints(old) {
		now, ok := have[name]
		if !ok {
			return true
		}
		for ep := range eps {
			if !now[ep] {
				return true
			}
		}
	}
	return false
}

// udpEndpoints maps each UDP port's name to the address:port endpoints
// (cluster and local) that serve it.
func udpEndpoints(sv *switchyardv1.ServiceView) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, p := range sv.GetPorts() {
		if p.GetProtocol() == switchyardv1.Protocol_PROTOCOL_UDP {
			out[p.GetName()] = map[string]bool{}
		}
	}
	if len(out) == 0 {
		return out
	}
	for _, eps := range [][]*switchyardv1.Endpoint{sv.GetClusterEndpoints(), sv.GetLocalEndpoints()} {
		for _, ep := range eps {
			for _, p := range ep.GetPorts() {
				if set, ok := out[p.GetName()]; ok {
					set[ep.GetAddress()+" "+strconv.FormatUint(uint64(p.GetPort()), 10)] = true
				}
			}
		}
	}
	return out
}
