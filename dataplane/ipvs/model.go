package ipvs

import (
	"net/netip"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
)

// vsModel is one virtual server and its real servers by address.
type vsModel struct {
	vs VirtualServer
	rs map[netip.AddrPort]RealServer
	// drainOnly marks a virtual server the state wants without real
	// servers: it stays while old real servers drain, then goes.
	drainOnly bool
}

// jump is a rule in a built-in chain that enters one of our chains.
type jump struct {
	table, chain, rule, target string
}

func (j jump) key() string { return j.table + "/" + j.chain + "/" + j.target }

// ruleset is this mode's part of one family's iptables tables: our chains
// (table → chain → rules) and the jumps to them present in built-in
// chains, by jump.key.
type ruleset struct {
	chains map[string]map[string][]string
	jumps  map[string]bool
}

func newRuleset() ruleset {
	return ruleset{chains: map[string]map[string][]string{"nat": {}, "filter": {}}, jumps: map[string]bool{}}
}

// model is this mode's part of the kernel: what it wants (rendered) or
// what the kernel holds (read back, or kept from the last Apply).
type model struct {
	vs    map[VSKey]*vsModel
	addrs map[netip.Addr]bool   // bound to kube-ipvs0
	sets  map[string]*ipset.Set // members in ipset save's spelling
	rules map[dataplane.Family]ruleset
	// linkUp is true once kube-ipvs0 is known to exist and be up.
	linkUp bool
}

func newModel() *model {
	return &model{vs: map[VSKey]*vsModel{}, addrs: map[netip.Addr]bool{}, sets: map[string]*ipset.Set{},
		rules: map[dataplane.Family]ruleset{}}
}

// desired is a rendered state: the model plus what reconciling needs.
type desired struct {
	*model
	nodeIPs map[netip.Addr]bool
	udp     map[dataplane.Family]map[string]conntrack.UDPPort
	skips   []dataplane.Skip
}

// rsKey names one real server of one virtual server.
type rsKey struct {
	vs VSKey
	rs netip.AddrPort
}

// deadline is when a real server that starts draining now must be gone.
func (d *Dataplane) deadline() time.Time { return d.clock.Now().Add(d.cfg.GracePeriod) }
