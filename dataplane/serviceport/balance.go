package serviceport

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Algorithm is how a port spreads new connections over the endpoints of
// a set (ServiceView.load_balancing).
type Algorithm uint8

// Algorithms. ModeDefault is a view without one: random in the netfilter
// modes and userspace, NodeConfig.ipvs_scheduler in the ipvs mode.
const (
	ModeDefault Algorithm = iota
	Random
	RoundRobin
	Maglev
	SourceHash
)

// algorithms are the names of the settings and of the annotation, in
// the order of the proto enum.
var algorithms = []struct {
	name string
	alg  Algorithm
	lb   switchyardv1.LoadBalancing
}{
	{"random", Random, switchyardv1.LoadBalancing_LOAD_BALANCING_RANDOM},
	{"round-robin", RoundRobin, switchyardv1.LoadBalancing_LOAD_BALANCING_ROUND_ROBIN},
	{"maglev", Maglev, switchyardv1.LoadBalancing_LOAD_BALANCING_MAGLEV},
	{"source-hash", SourceHash, switchyardv1.LoadBalancing_LOAD_BALANCING_SOURCE_HASH},
}

// AnnotationLoadBalancing on a Service selects its algorithm by name
// (ParseLoadBalancing); without it the cluster default applies.
const AnnotationLoadBalancing = "switchyard.io/load-balancing"

// ParseLoadBalancing reads an algorithm name: random, round-robin,
// maglev or source-hash.
func ParseLoadBalancing(name string) (switchyardv1.LoadBalancing, error) {
	for _, a := range algorithms {
		if a.name == name {
			return a.lb, nil
		}
	}
	return 0, fmt.Errorf("%q: want random, round-robin, maglev or source-hash", name)
}

// String returns the algorithm's name ("mode default" for ModeDefault).
func (a Algorithm) String() string {
	for _, x := range algorithms {
		if x.alg == a {
			return x.name
		}
	}
	return "mode default"
}

// Hashed reports whether the algorithm picks through a Maglev table.
func (a Algorithm) Hashed() bool { return a == Maglev || a == SourceHash }

func algorithmOf(lb switchyardv1.LoadBalancing) Algorithm {
	for _, x := range algorithms {
		if x.lb == lb {
			return x.alg
		}
	}
	return ModeDefault
}

// Table is a Maglev table read for one endpoint set of one port in one
// family: Slots[i] indexes that set (Port.Cluster or Port.Local, in
// their sorted order), so a mode maps a slot to an endpoint without
// parsing anything again.
type Table struct {
	Seed  uint32
	Slots []uint16
}

// Pick returns the index in the table's set of the endpoint a
// connection from src reaches: the slot nftables' "jhash ... mod
// len(Slots) seed Seed" computes from the client address and port
// (Maglev) or the address alone (SourceHash).
func (t *Table) Pick(alg Algorithm, src netip.AddrPort) int {
	key := maglev.FlowKey(src.Addr(), src.Port())
	if alg == SourceHash {
		key = maglev.AddrKey(src.Addr())
	}
	return int(t.Slots[maglev.JHashMod(key, t.Seed, uint32(len(t.Slots)))])
}

// readBalance sets p's Algorithm and tables. A hashed algorithm needs a
// table for each set with endpoints; a missing or inconsistent one
// (endpoints other than the set's, an index out of range) leaves the port
// random, reported: every node must hash alike or not at all, and only
// the control plane's table guarantees that.
func (p *Port) readBalance(svc string, sv *switchyardv1.ServiceView, f dataplane.Family, skipf func(string, string, ...any)) {
	p.Algorithm = algorithmOf(sv.GetLoadBalancing())
	if !p.Algorithm.Hashed() {
		return
	}
	var err error
	if p.ClusterTable, err = findTable(sv, p.Name, false, f, p.Cluster); err == nil {
		p.LocalTable, err = findTable(sv, p.Name, true, f, p.Local)
	}
	if err != nil {
		skipf(svc, "port %q: %s: %v: balanced at random", p.Name, p.Algorithm, err)
		p.Algorithm, p.ClusterTable, p.LocalTable = Random, nil, nil
	}
}

// findTable returns the table of one set (nil for a set without
// endpoints) with its slots re-indexed into eps.
func findTable(sv *switchyardv1.ServiceView, port string, local bool, f dataplane.Family, eps []Endpoint) (*Table, error) {
	if len(eps) == 0 {
		return nil, nil
	}
	set := "cluster"
	if local {
		set = "local"
	}
	i := slices.IndexFunc(sv.GetMaglevTables(), func(mt *switchyardv1.MaglevTable) bool {
		return mt.GetPortName() == port && mt.GetLocal() == local && mt.GetIpv6() == (f == dataplane.IPv6)
	})
	if i < 0 {
		return nil, fmt.Errorf("no %s %s table", f, set)
	}
	mt := sv.GetMaglevTables()[i]
	if len(mt.GetEndpoints()) != len(eps) {
		return nil, fmt.Errorf("%s %s table lists %d endpoints, the set has %d", f, set, len(mt.GetEndpoints()), len(eps))
	}
	index := make([]uint16, len(eps))
	taken := make([]bool, len(eps))
	for k, s := range mt.GetEndpoints() {
		ap, err := netip.ParseAddrPort(s)
		j := slices.IndexFunc(eps, func(ep Endpoint) bool { return ep.Addr == ap })
		if err != nil || j < 0 || taken[j] {
			return nil, fmt.Errorf("%s %s table: endpoint %q is not in the set, or twice in the table", f, set, s)
		}
		index[k], taken[j] = uint16(j), true
	}
	n := len(mt.GetSlots())
	if n < len(eps) || n > maglev.MaxSize {
		return nil, fmt.Errorf("%s %s table: %d slots for %d endpoints", f, set, n, len(eps))
	}
	t := &Table{Seed: mt.GetSeed(), Slots: make([]uint16, n)}
	for k, s := range mt.GetSlots() {
		if int(s) >= len(index) {
			return nil, fmt.Errorf("%s %s table: slot %d names endpoint %d of %d", f, set, k, s, len(index))
		}
		t.Slots[k] = index[s]
	}
	return t, nil
}
