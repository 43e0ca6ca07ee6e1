package dptest

import (
	"net/netip"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// SecondNodeAddress is the address AddSecondNodeAddress gives the node:
// local to it, on the client's segment, and not among the Node's
// addresses (NodeConfig.node_ips), as a second NIC's would be.
var SecondNodeAddress = netip.MustParseAddr("10.200.0.100")

// AddSecondNodeAddress adds SecondNodeAddress/24 to the node's uplink,
// inside the bed's node namespace.
func (b *Bed) AddSecondNodeAddress(t *testing.T) {
	t.Helper()
	if _, err := b.Topo.Exec(t.Context(), b.Node.NS, "ip", "addr", "add", SecondNodeAddress.String()+"/24", "dev", "eth0"); err != nil {
		t.Fatalf("second node address: %v", err)
	}
}

// NodePortCase is one NodeConfig.node_port_addresses list and the node
// addresses on which node ports must answer under it.
type NodePortCase struct {
	Name string
	// List is node_port_addresses; nil leaves the mode its default.
	List []string
	// OnNodeIP and OnSecond: node ports answer on the node IP (the
	// Node's address) and on SecondNodeAddress.
	OnNodeIP, OnSecond bool
}

// CheckNodePortAddresses gives the node SecondNodeAddress, then for each
// case programs, with apply, a NodePort service on vip (node port 30095)
// under the case's list, and connects from the client to the node port
// on the node IP and on the second address: an address that serves node
// ports reaches the pods; one that does not is refused at once by the
// node's kernel (nothing DNATs it and nothing listens there). From the
// node itself, 127.0.0.1 is refused at once in every case: loopback never
// serves node ports (it would need route_localnet; a loopback packet
// DNATed to a pod is dropped as a martian, which is a hang).
func (b *Bed) CheckNodePortAddresses(t *testing.T, vip netip.Addr, apply func(*testing.T, *dataplane.State), cases []NodePortCase) {
	t.Helper()
	const nodePort = 30095
	b.AddSecondNodeAddress(t)
	client := b.Topo.Client().NS
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			st := State(b.Node, Service("np", vip.String(), 80, nodePort, b.Pods...))
			st.Config.NodePortAddresses = tc.List
			apply(t, st)
			for _, a := range []struct {
				addr   netip.Addr
				serves bool
			}{{b.Node.IP, tc.OnNodeIP}, {SecondNodeAddress, tc.OnSecond}} {
				dst := netip.AddrPortFrom(a.addr, nodePort)
				if a.serves {
					b.CheckAnswered(t, client, dst, 10, "node port on "+a.addr.String())
				} else {
					b.CheckRefusedWithin(t, client, dst, RefuseWithin)
				}
			}
			b.CheckRefusedWithin(t, b.Node.NS, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), nodePort), RefuseWithin)
		})
	}
}
