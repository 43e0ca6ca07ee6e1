package nftables

import (
	"fmt"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
)

func TestRemovedUDPEndpointLosesEstablishedFlow(t *testing.T) {
	t.Run("with conntrack cleanup", func(t *testing.T) { udpFlowAfterRemoval(t, true) })
	// The control: without cleanup the kernel keeps the stale DNAT, which
	// shows the test can see the difference.
	t.Run("control without cleanup", func(t *testing.T) { udpFlowAfterRemoval(t, false) })
}

func udpFlowAfterRemoval(t *testing.T, cleanup bool) {
	b := newBed(t)
	h := b.NetfilterHandle(t)
	var cfg nftables.Config
	if cleanup {
		cfg.Conntrack = conntrack.Netlink{Handle: h}
	}
	b.dp = b.newDP(t, cfg)
	b.CheckUDPFlowAfterRemoval(t, vip, b.apply, cleanup)
}

func TestUDPTargetPortChangeMovesEstablishedFlow(t *testing.T) {
	for _, cleanup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleanup=%v", cleanup), func(t *testing.T) {
			b := newBed(t)
			var cfg nftables.Config
			if cleanup {
				cfg.Conntrack = conntrack.Netlink{Handle: b.NetfilterHandle(t)}
			}
			b.dp = b.newDP(t, cfg)
			b.CheckUDPFlowAfterTargetPortChange(t, vip, b.apply, cleanup)
		})
	}
}
