package nftables

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestNodePortAddresses (issue 17): by default node ports answer on the
// node's primary address only, as in kube-proxy's nftables mode, not on
// another local address; node_port_addresses widens or moves them;
// loopback never serves.
func TestNodePortAddresses(t *testing.T) {
	b := newBed(t)
	b.CheckNodePortAddresses(t, vip.Addr(), b.apply, []dptest.NodePortCase{
		{Name: "default: the primary address only", OnNodeIP: true},
		{Name: "all: every local address", List: []string{"all"}, OnNodeIP: true, OnSecond: true},
		{Name: "a CIDR holding only the second address", List: []string{"10.200.0.96/28"}, OnSecond: true},
		{Name: "primary and a CIDR holding the second address", List: []string{"primary", "10.200.0.96/28"}, OnNodeIP: true, OnSecond: true},
	})
}
