package dptest

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// secondNodeAddrs are the addresses AddSecondNodeAddress gives the node,
// per family: local to it, on the client's segment, and not among the
// Node's addresses (NodeConfig.node_ips), as a second NIC's would be.
var secondNodeAddrs = map[dataplane.Family]netip.Prefix{
	dataplane.IPv4: netip.MustParsePrefix("10.200.0.100/24"),
	dataplane.IPv6: netip.MustParsePrefix("fd00:200::64/64"),
}

// The node_port_addresses entries a NodePortCase names by role; the
// check puts the bed family's CIDR in their place.
const (
	// SecondOnlyCIDR holds the second node address and not the node IP:
	// 10.200.0.96/28, fd00:200::60/124.
	SecondOnlyCIDR = "<second-only>"
	// NodeIPOnlyCIDR holds the node IP and not the second address:
	// 10.200.0.0/28, fd00:200::/124.
	NodeIPOnlyCIDR = "<node-ip-only>"
)

var roleCIDRs = map[dataplane.Family]map[string]string{
	dataplane.IPv4: {SecondOnlyCIDR: "10.200.0.96/28", NodeIPOnlyCIDR: "10.200.0.0/28"},
	dataplane.IPv6: {SecondOnlyCIDR: "fd00:200::60/124", NodeIPOnlyCIDR: "fd00:200::/124"},
}

// SecondNodeAddress is the address AddSecondNodeAddress gives the node
// in the bed's family.
func (b *Bed) SecondNodeAddress() netip.Addr { return secondNodeAddrs[b.Family].Addr() }

// AddSecondNodeAddress adds the bed family's second address to the
// node's uplink, inside the bed's node namespace.
func (b *Bed) AddSecondNodeAddress(t *testing.T) {
	t.Helper()
	if _, err := b.Topo.Exec(t.Context(), b.Node.NS, "ip", "addr", "add", secondNodeAddrs[b.Family].String(), "dev", "eth0"); err != nil {
		t.Fatalf("second node address: %v", err)
	}
}

// NodePortCase is one NodeConfig.node_port_addresses list and the node
// addresses on which node ports must answer under it.
type NodePortCase struct {
	Name string
	// List is node_port_addresses; nil leaves the mode its default.
	// SecondOnlyCIDR and NodeIPOnlyCIDR stand for the bed family's
	// CIDRs of that role.
	List []string
	// OnNodeIP and OnSecond: node ports answer on the node IP (the
	// Node's address) and on the second node address.
	OnNodeIP, OnSecond bool
}

// CheckNodePortAddresses gives the node a second address of the bed's
// family, then for each case programs, with apply, a NodePort service
// on the bed's VIP (node port 30095) under the case's list, and connects
// from the client to the node port on the node IP and on the second
// address: an address that serves node ports reaches the pods; one that
// does not is refused at once by the node's kernel (nothing DNATs it and
// nothing listens there). From the node itself, the family's loopback
// address is refused at once in every case: loopback never serves node
// ports (it would need route_localnet, which IPv6 does not have; a
// loopback packet DNATed to a pod is dropped as a martian, which is a
// hang).
func (b *Bed) CheckNodePortAddresses(t *testing.T, apply func(*testing.T, *dataplane.State), cases []NodePortCase) {
	t.Helper()
	const nodePort = 30095
	b.AddSecondNodeAddress(t)
	client := b.Topo.Client().NS
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			st := State(b.Node, Service("np", b.VIP().Addr().String(), 80, nodePort, b.Pods...))
			st.Config.NodePortAddresses = slices.Clone(tc.List)
			for i, e := range st.Config.NodePortAddresses {
				if cidr, ok := roleCIDRs[b.Family][e]; ok {
					st.Config.NodePortAddresses[i] = cidr
				}
			}
			apply(t, st)
			for _, a := range []struct {
				addr   netip.Addr
				serves bool
			}{{b.NodeIP(), tc.OnNodeIP}, {b.SecondNodeAddress(), tc.OnSecond}} {
				dst := netip.AddrPortFrom(a.addr, nodePort)
				if a.serves {
					b.CheckAnswered(t, client, dst, 10, "node port on "+a.addr.String())
				} else {
					b.CheckRefusedWithin(t, client, dst, RefuseWithin)
				}
			}
			b.CheckRefusedWithin(t, b.Node.NS, netip.AddrPortFrom(loopbacks[b.Family], nodePort), RefuseWithin)
		})
	}
}
