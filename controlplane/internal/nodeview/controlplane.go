package nodeview

import (
	"net"
	"net/netip"
	"slices"
	"strconv"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// GRPCPortName is the name of the port of the control plane's own Service
// that agents dial. A slice without a TCP port of that name is read on its
// only port, when it has exactly one and it is TCP.
const GRPCPortName = "grpc"

// MaxControlPlaneAddresses bounds the addresses a NodeConfig advertises:
// they are in every node's NodeConfig, so a Service with a thousand
// endpoints named by mistake must not cost every node a thousand
// addresses. The lowest ones, in sort order, are kept.
const MaxControlPlaneAddresses = 64

// controlPlaneAddresses returns "host:port" (net.JoinHostPort) of every
// ready endpoint of a service's slices, on its slice's gRPC port, sorted
// by address then port (IPv4 before IPv6), without duplicates and at most
// MaxControlPlaneAddresses; nil when there is none. The result depends
// only on the slices' content, not on map order: every replica computes
// the same list.
func controlPlaneAddresses(bySlice map[model.SliceKey]*model.EndpointSlice) []string {
	var aps []netip.AddrPort
	for _, s := range bySlice {
		port, ok := grpcPort(s.Ports)
		if !ok {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Ready {
				aps = append(aps, netip.AddrPortFrom(ep.Address, port))
			}
		}
	}
	if len(aps) == 0 {
		return nil
	}
	slices.SortFunc(aps, netip.AddrPort.Compare)
	aps = slices.Compact(aps)
	aps = aps[:min(len(aps), MaxControlPlaneAddresses)]
	out := make([]string, len(aps))
	for i, ap := range aps {
		out[i] = net.JoinHostPort(ap.Addr().String(), strconv.Itoa(int(ap.Port())))
	}
	return out
}

// grpcPort picks the port agents dial from a slice's ports.
func grpcPort(ports []model.EndpointPort) (uint16, bool) {
	for _, p := range ports {
		if p.Name == GRPCPortName && p.Protocol == model.ProtocolTCP {
			return p.Port, true
		}
	}
	if len(ports) == 1 && ports[0].Protocol == model.ProtocolTCP {
		return ports[0].Port, true
	}
	return 0, false
}

// advertised returns the addresses to advertise for the state: none when
// key is the zero key (the feature is off).
func advertised(st *model.State, key model.ServiceKey) []string {
	if key == (model.ServiceKey{}) {
		return nil
	}
	return controlPlaneAddresses(st.Slices[key])
}

// controlPlanes recomputes the advertised addresses when the advertised
// service is among the listed ones. A different list replaces the config
// base, which changes every node's NodeConfig.
func (u *updater) controlPlanes(services []model.ServiceKey) {
	key := u.old.advertise
	if key == (model.ServiceKey{}) || !slices.Contains(services, key) {
		return
	}
	addrs := advertised(u.st, key)
	if slices.Equal(addrs, u.old.config.controlPlanes) {
		return
	}
	u.config.controlPlanes = addrs
	u.ch.allConfigs = true
}

// rebuildConfigs returns the entries with every known node's NodeConfig
// rebuilt from the updater's config base: copies of the entries whose
// config changes, the others as they are (those edited by this Update
// already have a config from the new base).
func (u *updater) rebuildConfigs(entries []*nodeEntry) []*nodeEntry {
	out := make([]*nodeEntry, len(entries))
	for i, e := range entries {
		if ne := u.nodes[e.name]; e.node == nil || (ne != nil && ne.setNode) {
			out[i] = e
			continue
		}
		c := *e
		c.config = u.config.nodeConfig(e.name, e.node)
		out[i] = &c
	}
	return out
}
