package nftables

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestNodePortAddresses (issue 17): by default node ports answer on the
// node's primary address only, as in kube-proxy's nftables mode, not on
// another local address; node_port_addresses widens or moves them;
// loopback never serves. In both families: IPv6 on a dual-stack bed,
// its CIDRs in the list.
func TestNodePortAddresses(t *testing.T) {
	cases := []dptest.NodePortCase{
		{Name: "default: the primary address only", OnNodeIP: true},
		{Name: "all: every local address", List: []string{"all"}, OnNodeIP: true, OnSecond: true},
		{Name: "a CIDR holding only the second address", List: []string{dptest.SecondOnlyCIDR}, OnSecond: true},
		{Name: "primary and a CIDR holding the second address", List: []string{"primary", dptest.SecondOnlyCIDR}, OnNodeIP: true, OnSecond: true},
	}
	dptest.ForFamilies(t, func(t *testing.T, f dataplane.Family) {
		b := newBedFor(t, f, false)
		b.CheckNodePortAddresses(t, b.apply, cases)
	})
}
