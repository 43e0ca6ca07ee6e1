package nodeview

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"maps"
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
	// FlowtableInterfaces are the interface name patterns whose
	// established Service flows the nftables mode offloads to a
	// flowtable (NodeConfig.flowtable_interfaces); empty: none.
	FlowtableInterfaces []string
	// LoadBalancing is the algorithm of services without a
	// switchyard.io/load-balancing annotation (random, round-robin,
	// maglev, source-hash); empty leaves each mode its default. It goes
	// into service views, not NodeConfigs: an Index takes it at
	// NewIndex and WithLoadBalancing, and WithSettings ignores it (a
	// per-node value could not give every node the same table).
	LoadBalancing string
}

// settingsBase is one set of settings converted once: the cluster's,
// or a per-node exception's.
type settingsBase struct {
	mode      switchyardv1.DataplaneMode
	minSync   time.Duration
	sync      time.Duration
	scheduler string
	cidrs     []string
	masqAll   bool
	nodePorts []string
	flowtable []string
	// hash is the settings hash of the fields above
	// (NodeConfig.settings_hash).
	hash string
}

// configBase is the node-independent part of every NodeConfig, converted
// once per Index.
type configBase struct {
	settingsBase
	// perNode are the nodes whose settings are not the cluster's (a Node
	// label, a rollout step), by node name; shared between Indexes and
	// never modified.
	perNode map[string]*settingsBase
	// planHash hashes the cluster's hash and every per-node one: equal
	// plans send every node the same settings.
	planHash string
	// controlPlanes are the advertised control-plane addresses
	// (controlPlaneAddresses), shared by every node's NodeConfig.
	controlPlanes []string
	// serviceCIDRs are the state's service ranges (serviceCIDRs),
	// shared by every node's NodeConfig.
	serviceCIDRs []string
}

// Settings are the settings of every node: the cluster's Defaults, and
// the nodes that get others.
type Settings struct {
	Defaults Defaults
	// PerNode maps a node's name to its own settings; a node absent from
	// it gets Defaults.
	PerNode map[string]Defaults
}

func newSettingsBase(d Defaults) settingsBase {
	c := settingsBase{
		mode:      d.Mode,
		minSync:   d.MinSyncPeriod,
		sync:      d.SyncPeriod,
		scheduler: text(d.IPVSScheduler),
		cidrs:     stringsOf(d.ClusterCIDRs),
		masqAll:   d.MasqueradeAll,
		nodePorts: slices.Clone(d.NodePortAddresses),
		flowtable: slices.Clone(d.FlowtableInterfaces),
	}
	c.hash = c.settingsHash()
	return c
}

func newConfigBase(s Settings) configBase {
	c := configBase{settingsBase: newSettingsBase(s.Defaults)}
	if len(s.PerNode) > 0 {
		// Nodes sharing settings share one converted copy: a rollout step
		// gives thousands of nodes the same two or three.
		byHash := map[string]*settingsBase{}
		c.perNode = make(map[string]*settingsBase, len(s.PerNode))
		for name, d := range s.PerNode {
			b := newSettingsBase(d)
			if b.hash == c.hash {
				continue
			}
			if shared, ok := byHash[b.hash]; ok {
				c.perNode[name] = shared
				continue
			}
			byHash[b.hash] = &b
			c.perNode[name] = &b
		}
	}
	c.planHash = c.hashPlan()
	return c
}

// hashPlan hashes the cluster's settings hash and each per-node one,
// by node name.
func (c configBase) hashPlan() string {
	if len(c.perNode) == 0 {
		return c.hash
	}
	h := sha256.New()
	h.Write([]byte(c.hash))
	for _, name := range slices.Sorted(maps.Keys(c.perNode)) {
		h.Write([]byte{0})
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write([]byte(c.perNode[name].hash))
	}
	return hex.EncodeToString(h.Sum(nil)[:versionBytes])
}

// forNode returns the settings of the named node.
func (c configBase) forNode(name string) *settingsBase {
	if b, ok := c.perNode[name]; ok {
		return b
	}
	return &c.settingsBase
}

// settingsHash hashes the deterministic encoding of a NodeConfig holding
// only the settings: the same settings give the same hash on every
// replica and in every release that encodes them the same way.
func (c settingsBase) settingsHash() string {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c.settings())
	if err != nil { // a NodeConfig of strings, bools and durations always encodes
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:versionBytes])
}

// settings is a NodeConfig with only the settings set.
func (c settingsBase) settings() *switchyardv1.NodeConfig {
	nc := &switchyardv1.NodeConfig{
		Mode:          c.mode,
		IpvsScheduler: c.scheduler,
		ClusterCidrs:  c.cidrs,
		MasqueradeAll: c.masqAll,
		// Shared, never modified: every NodeConfig points at one slice.
		NodePortAddresses: c.nodePorts,
		// Shared too.
		FlowtableInterfaces: c.flowtable,
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

// SettingsHash is the NodeConfig.settings_hash of d.
func SettingsHash(d Defaults) string { return newSettingsBase(d).hash }

// SettingsHash is the cluster's settings hash: the NodeConfig.settings_hash
// of every node without settings of its own.
func (ix *Index) SettingsHash() string { return ix.config.hash }

// NodeSettingsHash is the NodeConfig.settings_hash the Index sends the
// named node, and whether that node has settings of its own.
func (ix *Index) NodeSettingsHash(name string) (string, bool) {
	b, own := ix.config.perNode[name]
	if !own {
		return ix.config.hash, false
	}
	return b.hash, true
}

// WithDefaults is WithSettings with no node of its own.
func (ix *Index) WithDefaults(d Defaults) (*Index, bool) {
	next, all, _ := ix.WithSettings(Settings{Defaults: d})
	return next, all
}

// WithSettings returns an Index whose NodeConfigs carry s; whether that
// changed every node's NodeConfig (Changes.AllConfigs: the cluster's
// settings changed); else the nodes whose NodeConfig changed
// (Changes.ConfigNodes). Settings that send every node what ix does
// return ix itself: a ConfigMap rewritten with the same values re-sends
// nothing. The service views are shared with ix, which stays valid and
// unchanged.
func (ix *Index) WithSettings(s Settings) (*Index, bool, []string) {
	base := newConfigBase(s)
	if base.planHash == ix.config.planHash {
		return ix, false, nil
	}
	base.controlPlanes, base.serviceCIDRs = ix.config.controlPlanes, ix.config.serviceCIDRs
	next := *ix
	next.config = base
	u := &updater{old: ix, config: base}
	next.nodes = u.rebuildConfigs(ix.nodes)
	if base.hash != ix.config.hash {
		return &next, true, nil
	}
	var changed []string
	for name := range unionKeys(ix.config.perNode, base.perNode) {
		if ix.config.forNode(name).hash != base.forNode(name).hash {
			changed = append(changed, name)
		}
	}
	slices.Sort(changed)
	return &next, false, changed
}

// nodeConfig builds the NodeConfig resource of a node. node is nil for a
// node the state does not know yet: its config carries the name, the
// defaults and the control-plane addresses, and no zone or node
// addresses.
func (c configBase) nodeConfig(name string, node *model.Node) *View {
	s := c.forNode(name)
	nc := s.settings()
	nc.NodeName, nc.SettingsHash = text(name), s.hash
	// Shared, never modified: every NodeConfig points at one slice.
	nc.ControlPlaneAddresses = c.controlPlanes
	nc.ServiceCidrs = c.serviceCIDRs
	if node != nil {
		nc.Zone = text(node.Zone)
		nc.NodeIps = stringsOf(node.Addresses)
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
	return stringsOf(slices.Compact(ps))
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
