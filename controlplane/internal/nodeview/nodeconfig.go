package nodeview

import (
	"net/netip"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Defaults are the cluster-wide settings the control plane hands every
// node in its NodeConfig.
type Defaults struct {
	// Mode overrides the agents' --mode unless UNSPECIFIED.
	Mode switchyardv1.DataplaneMode
	// MinSyncPeriod and SyncPeriod tune the agents' sync loop; zero leaves
	// the agent's own value.
	MinSyncPeriod time.Duration
	SyncPeriod    time.Duration
	// IPVSScheduler is the IPVS scheduler; empty means rr.
	IPVSScheduler string
	// ClusterCIDRs are the pod CIDRs: service traffic from outside them is
	// masqueraded.
	ClusterCIDRs  []netip.Prefix
	MasqueradeAll bool
}

// configBase is the node-independent part of every NodeConfig, converted
// once per Index.
type configBase struct {
	mode      switchyardv1.DataplaneMode
	minSync   time.Duration
	sync      time.Duration
	scheduler string
	cidrs     []string
	masqAll   bool
	// controlPlanes are the advertised control-plane addresses
	// (controlPlaneAddresses), shared by every node's NodeConfig.
	controlPlanes []string
}

func newConfigBase(d Defaults) configBase {
	return configBase{
		mode:      d.Mode,
		minSync:   d.MinSyncPeriod,
		sync:      d.SyncPeriod,
		scheduler: text(d.IPVSScheduler),
		cidrs:     prefixStrings(d.ClusterCIDRs),
		masqAll:   d.MasqueradeAll,
	}
}

// nodeConfig builds the NodeConfig resource of a node. node is nil for a
// node the state does not know yet: its config carries the name, the
// defaults and the control-plane addresses, and no zone or node
// addresses.
func (c configBase) nodeConfig(name string, node *model.Node) *View {
	nc := &switchyardv1.NodeConfig{
		NodeName:      text(name),
		Mode:          c.mode,
		IpvsScheduler: c.scheduler,
		ClusterCidrs:  c.cidrs,
		MasqueradeAll: c.masqAll,
		// Shared, never modified: every NodeConfig points at one slice.
		ControlPlaneAddresses: c.controlPlanes,
	}
	if c.minSync > 0 || c.sync > 0 {
		nc.Sync = &switchyardv1.SyncSettings{}
		if c.minSync > 0 {
			nc.Sync.MinSyncPeriod = durationpb.New(c.minSync)
		}
		if c.sync > 0 {
			nc.Sync.SyncPeriod = durationpb.New(c.sync)
		}
	}
	if node != nil {
		nc.Zone = text(node.Zone)
		nc.NodeIps = addrStrings(node.Addresses)
	}
	return newConfigResource(text(name), nc)
}
