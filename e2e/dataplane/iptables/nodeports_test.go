package iptables

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestNodePortAddresses (issue 17): by default node ports answer on every
// local address, as in kube-proxy's iptables mode: on an address the Node
// object does not list too. node_port_addresses restricts them; loopback
// never serves.
func TestNodePortAddresses(t *testing.T) {
	b := newBed(t)
	b.CheckNodePortAddresses(t, vip.Addr(), b.apply, []dptest.NodePortCase{
		{Name: "default: every local address", OnNodeIP: true, OnSecond: true},
		{Name: "primary: the node IP only", List: []string{"primary"}, OnNodeIP: true},
		{Name: "a CIDR holding only the second address", List: []string{"10.200.0.96/28"}, OnSecond: true},
		{Name: "a CIDR without the second address", List: []string{"10.200.0.0/28"}, OnNodeIP: true},
		{Name: "all", List: []string{"all"}, OnNodeIP: true, OnSecond: true},
	})
}
