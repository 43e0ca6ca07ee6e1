package nodeview

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
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
	// NodePortAddresses is kube-proxy's nodePortAddresses: CIDRs and the
	// keywords "primary" and "all"; empty leaves each agent's mode its
	// default (NodeConfig.node_port_addresses).
	NodePortAddresses []string
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
	nodePorts []string
	// hash is the settings hash of the fields above
	// (NodeConfig.settings_hash).
	hash string
	// controlPlanes are the advertised control-plane addresses
	// (controlPlaneAddresses), shared by every node's NodeConfig.
	controlPlanes []string
	// serviceCIDRs are the state's service ranges (serviceCIDRs),
	// shared by every node's NodeConfig.
	serviceCIDRs []string
}

func newConfigBase(d Defaults) configBase {
	c := configBase{
		mode:      d.Mode,
		minSync:   d.MinSyncPeriod,
		sync:      d.SyncPeriod,
		scheduler: text(d.IPVSScheduler),
		cidrs:     prefixStrings(d.ClusterCIDRs),
		masqAll:   d.MasqueradeAll,
		nodePorts: slices.Clone(d.NodePortAddresses),
	}
	c.hash = c.settingsHash()
	return c
}

// settingsHash hashes the deterministic encoding of a NodeConfig holding
// only the settings: the same settings give the same hash on every
// replica and in every release that encodes them the same way.
func (c configBase) settingsHash() string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.settings())
	if err != nil { // a NodeConfig of strings, bools and durations always encodes
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:versionBytes])
}

// settings is a NodeConfig with only the cluster-wide settings set.
func (c configBase) settings() *switchyardv1.NodeConfig {
	nc := &switchyardv1.NodeConfig{
		Mode:          c.mode,
		IpvsScheduler: c.scheduler,
		ClusterCidrs:  c.cidrs,
		MasqueradeAll: c.masqAll,
		// Shared, never modified: every NodeConfig points at one slice.
		NodePortAddresses: c.nodePorts,
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
	return nc
}

// SettingsHash is the NodeConfig.settings_hash of every NodeConfig the
// Index hands out.
func (ix *Index) SettingsHash() string { return ix.config.hash }

// WithDefaults returns an Index whose NodeConfigs carry d, and whether
// that changed every node's NodeConfig (Changes.AllConfigs). Defaults
// equal to the Index's (same settings hash) return ix itself: a ConfigMap
// rewritten with the same values re-sends nothing. The service views are
// shared with ix, which stays valid and unchanged.
func (ix *Index) WithDefaults(d Defaults) (*Index, bool) {
	base := newConfigBase(d)
	if base.hash == ix.config.hash {
		return ix, false
	}
	base.controlPlanes, base.serviceCIDRs = ix.config.controlPlanes, ix.config.serviceCIDRs
	next := *ix
	next.config = base
	u := &updater{old: ix, config: base}
	next.nodes = u.rebuildConfigs(ix.nodes)
	return &next, true
}

// nodeConfig builds the NodeConfig resource of a node. node is nil for a
// node the state does not know yet: its config carries the name, the
// defaults and the control-plane addresses, and no zone or node
// addresses.
func (c configBase) nodeConfig(name string, node *model.Node) *View {
	nc := c.settings()
	nc.NodeName, nc.SettingsHash = text(name), c.hash
	// Shared, never modified: every NodeConfig points at one slice.
	nc.ControlPlaneAddresses = c.controlPlanes
	nc.ServiceCidrs = c.serviceCIDRs
	if node != nil {
		nc.Zone = text(node.Zone)
		nc.NodeIps = addrStrings(node.Addresses)
	}
	return newConfigResource(text(name), nc)
}

// serviceCIDRs returns the ranges of every ServiceCIDR of st, sorted
// (IPv4 first, then by address and length) and without duplicates; nil
// when there is none. It depends only on the objects' content, not on
// map order, so every replica sends the same list.
func serviceCIDRs(st *model.State) []string {
	var ps []netip.Prefix
	for _, sc := range st.ServiceCIDRs {
		if sc != nil {
			ps = append(ps, sc.CIDRs...)
		}
	}
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
	})
	return prefixStrings(slices.Compact(ps))
}

// serviceRanges recomputes the service ranges. A different list
// replaces the config base, which changes every node's NodeConfig (as a
// new advertised control-plane list does): ServiceCIDR objects are few
// and rarely change, so the cost is a scan of them per Update.
func (u *updater) serviceRanges() {
	cidrs := serviceCIDRs(u.st)
	if slices.Equal(cidrs, u.old.config.serviceCIDRs) {
		return
	}
	u.config.serviceCIDRs = cidrs
	u.ch.allConfigs = true
}
