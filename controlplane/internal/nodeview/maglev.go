package nodeview

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// loadBalancing is the view's algorithm for a name; "" (no annotation
// and no cluster default) is UNSPECIFIED, each mode's default. Names are
// checked where they enter (translate, settings), so an unknown one
// cannot reach here; it would be UNSPECIFIED too.
func loadBalancing(name string) switchyardv1.LoadBalancing {
	lb, err := serviceport.ParseLoadBalancing(name)
	if err != nil {
		return switchyardv1.LoadBalancing_LOAD_BALANCING_UNSPECIFIED
	}
	return lb
}

func hashed(lb switchyardv1.LoadBalancing) bool {
	return lb == switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV ||
		lb == switchyardv1.LoadBalancing_LOAD_BALANCING_SOURCE_HASH
}

// maglevTables builds the table of every service port, set and family of
// sv that has endpoints, in port order, cluster set first, IPv4 first.
// The identity of an endpoint is its address and target port, exactly as
// an agent's serviceport reads the set, so the agent finds every table
// endpoint in its set. Tables are memoized by content: the variants of a
// service (zones, nodes) mostly share their sets.
func (b *builder) maglevTables(sv *switchyardv1.ServiceView) []*switchyardv1.MaglevTable {
	var out []*switchyardv1.MaglevTable
	sets := []struct {
		local bool
		eps   []*switchyardv1.Endpoint
	}{{false, sv.ClusterEndpoints}, {true, sv.LocalEndpoints}}
	for _, set := range sets {
		for _, port := range b.portNames {
			var v4, v6 []string
			for _, ep := range set.eps {
				a, err := netip.ParseAddr(ep.Address)
				if err != nil {
					continue
				}
				a = a.Unmap()
				for _, pt := range ep.Ports {
					if pt.Name != port || pt.Port == 0 || pt.Port > 65535 {
						continue
					}
					ap := netip.AddrPortFrom(a, uint16(pt.Port)).String()
					if a.Is4() {
						v4 = append(v4, ap)
					} else {
						v6 = append(v6, ap)
					}
				}
			}
			for _, fam := range []struct {
				ipv6 bool
				eps  []string
			}{{false, v4}, {true, v6}} {
				if t := b.maglevTable(port, set.local, fam.ipv6, fam.eps); t != nil {
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// maglevTable returns the table of one set, nil when it has no endpoint.
func (b *builder) maglevTable(port string, local, ipv6 bool, eps []string) *switchyardv1.MaglevTable {
	if len(eps) == 0 {
		return nil
	}
	slices.Sort(eps)
	eps = slices.Compact(eps)
	key := strings.Join(append([]string{port, boolKey(local), boolKey(ipv6)}, eps...), "\x00")
	if t, ok := b.tables[key]; ok {
		return t
	}
	tab, err := maglev.New(eps, maglev.Size(len(eps)))
	if err != nil {
		// Unreachable: identities are distinct and non-empty, and Size
		// fits any count up to MaxSize endpoints, more than a service
		// port can list. Without a table the agents balance at random.
		return nil
	}
	t := &switchyardv1.MaglevTable{
		PortName: port, Local: local, Ipv6: ipv6, Seed: maglev.Seed,
		Endpoints: tab.Backends, Slots: make([]uint32, len(tab.Slots)),
	}
	for i, s := range tab.Slots {
		t.Slots[i] = uint32(s)
	}
	if b.tables == nil {
		b.tables = map[string]*switchyardv1.MaglevTable{}
	}
	b.tables[key] = t
	return t
}

func boolKey(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

// LoadBalancing is the cluster's default algorithm the Index computed
// its views with (Defaults.LoadBalancing).
func (ix *Index) LoadBalancing() string { return ix.balance }

// WithLoadBalancing returns an Index that computes views with name as
// the default algorithm. Views already computed keep theirs: the caller
// must list every service in its next Update (all of them may change).
func (ix *Index) WithLoadBalancing(name string) *Index {
	if name == ix.balance {
		return ix
	}
	next := *ix
	next.balance = name
	return &next
}
