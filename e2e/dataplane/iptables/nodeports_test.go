package iptables

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestNodePortAddresses (issue 17): by default node ports answer on every
// local address, as in kube-proxy's iptables mode: on an address the Node
// object does not list too. node_port_addresses restricts them; loopback
// never serves. In both families: IPv6 on a dual-stack bed, with its
// CIDRs in the list.
func TestNodePortAddresses(t *testing.T) {
	cases := []dptest.NodePortCase{
		{Name: "default: every local address", OnNodeIP: true, OnSecond: true},
		{Name: "primary: the node IP only", List: []string{"primary"}, OnNodeIP: true},
		{Name: "a CIDR holding only the second address", List: []string{dptest.SecondOnlyCIDR}, OnSecond: true},
		{Name: "a CIDR without the second address", List: []string{dptest.NodeIPOnlyCIDR}, OnNodeIP: true},
		{Name: "all", List: []string{"all"}, OnNodeIP: true, OnSecond: true},
	}
	dptest.ForFamilies(t, func(t *testing.T, f dataplane.Family) {
		b := newBedFor(t, f, false)
		b.CheckNodePortAddresses(t, b.apply, cases)
	})
}
