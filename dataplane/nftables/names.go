package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// DefaultTable is the table this mode owns in each family.
const DefaultTable = "switchyard"

// Fixed chains, maps and sets. Per-service objects carry one of the
// prefixes below, a hash and a readable name that always contains "/",
// which the fixed names never do.
const (
	chainNatPrerouting   = "nat-prerouting"
	chainNatOutput       = "nat-output"
	chainNatPostrouting  = "nat-postrouting"
	chainFilterInput     = "filter-input"
	chainFilterForward   = "filter-forward"
	chainFilterOutput    = "filter-output"
	chainFilterPreDNAT   = "filter-prerouting-pre-dnat"
	chainFilterOutPreDNA = "filter-output-pre-dnat"

	chainServices      = "services"
	chainMarkMasq      = "mark-for-masquerade"
	chainMasquerading  = "masquerading"
	chainServiceCheck  = "service-endpoints-check"
	chainNodePortChk   = "nodeport-endpoints-check"
	chainFirewallChk   = "firewall-check"
	chainClusterIPsChk = "cluster-ips-check"
	chainReject        = "reject-chain"

	mapServiceIPs    = "service-ips"
	mapServiceNPs    = "service-nodeports"
	mapNoEPServices  = "no-endpoint-services"
	mapNoEPNodePort  = "no-endpoint-nodeports"
	mapFirewallIPs   = "firewall-ips"
	setClusterCIDRs  = "cluster-cidrs"
	setNodePortIPs   = "nodeport-ips"
	setNodePortCIDRs = "nodeport-cidrs"
	setClusterIPs    = "cluster-ips"
	setServiceCIDRs  = "service-cidrs"
	setHairpin       = "hairpin-endpoints"
	// endpoints-<proto>-<shard>: see slots.go and endpointMap.
	prefixEndpoints = "endpoints-"
	// maglev-<proto>-<shard>: see maglevMap.
	prefixMaglev = "maglev-"

	prefixSVC      = "svc-"
	prefixLocal    = "local-"
	prefixExt      = "ext-"
	prefixFW       = "fw-"
	prefixEP       = "ep-"
	prefixAffinity = "affinity-"

	// slots is the range numgen draws from to pick an endpoint: endpoint
	// i of n owns slots [i·slots/n, (i+1)·slots/n) of its chain's block,
	// so shares are exact to 1/65,536 and the modulus never changes with
	// n (see balance and slots.go).
	slots = 65536

	// masqMark is the bit mark-for-masquerade sets and masquerading
	// tests; the same bit as the iptables mode, so a mode switch keeps
	// flows that were marked by either.
	masqMark = "0x4000"
)

// nftFamily is the nftables family of a table for f.
func nftFamily(f dataplane.Family) knftables.Family {
	if f == dataplane.IPv6 {
		return knftables.IPv6Family
	}
	return knftables.IPv4Family
}

// ipKeyword is the payload keyword ("ip saddr", "ip6 daddr").
func ipKeyword(f dataplane.Family) string {
	if f == dataplane.IPv6 {
		return "ip6"
	}
	return "ip"
}

// addrType is the set key type of an address.
func addrType(f dataplane.Family) string {
	if f == dataplane.IPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

func notLocalhost(f dataplane.Family) string {
	if f == dataplane.IPv6 {
		return "ip6 daddr != ::1"
	}
	return "ip daddr != 127.0.0.0/8"
}

// dnatTarget is the "dnat to" argument for an endpoint.
func dnatTarget(ap netip.AddrPort) string { return ap.String() }

// hashed returns prefix + 8 base32 characters of a SHA-256 of id + "-" +
// readable. The hash keeps names unique (readable parts are joined with
// "/" and "__", which input names cannot contain) and tells apart names
// that differ in one digit; the readable part is for operators.
func hashed(prefix, id, readable string) string {
	h := sha256.Sum256([]byte(id))
	return prefix + base32.StdEncoding.EncodeToString(h[:])[:8] + "-" + readable
}

// portNames are the names of one service port's objects.
type portNames struct {
	svc, local, ext, fw string
	base, id            string
}

// namesFor derives the chain names of a service port. readable is
// "namespace/name/proto/port" (kube-proxy's form; port may be empty).
func namesFor(ns, name, port string, proto dataplane.Protocol) portNames {
	base := ns + "/" + name + "/" + proto.String() + "/" + port
	return portNames{
		svc: hashed(prefixSVC, base, base), local: hashed(prefixLocal, base, base),
		ext: hashed(prefixExt, base, base), fw: hashed(prefixFW, base, base),
		base: base, id: base,
	}
}

// endpointChain and affinitySet name the per-endpoint objects. IPv6
// colons are not allowed in names and become dots. The affinity timeout
// is part of the set's identity: sets cannot be altered in place, so a
// new timeout is a new set.
func (n portNames) endpointChain(ep netip.AddrPort) string {
	r := n.base + "__" + epReadable(ep)
	return hashed(prefixEP, r, r)
}

func (n portNames) affinitySet(ep netip.AddrPort, timeout uint32) string {
	r := n.base + "__" + epReadable(ep)
	return hashed(prefixAffinity, fmt.Sprintf("%s/%d", r, timeout), r)
}

func epReadable(ep netip.AddrPort) string {
	return strings.ReplaceAll(ep.Addr().String(), ":", ".") + "/" + fmt.Sprint(ep.Port())
}

// isServiceObject reports whether a chain or set name is per-service.
func isServiceObject(name string) bool { return strings.Contains(name, "/") }

// endpointShards is the number of endpoint maps per protocol. A map
// element is checked against every rule bound to its map when it is
// added (measured: 5,000 rules on one map made loading its 25,000
// elements cost 7.6–13.6 s of kernel CPU, 0.4 s unbound), while every
// set is found by name in a list (one map per service: ~40 s to load
// 10,000); 32 maps per protocol keep both small.
const endpointShards = 32

// endpointMap is the map holding the endpoints of the chains whose
// blocks fall in one shard of one protocol.
func endpointMap(proto dataplane.Protocol, block uint32) string {
	return fmt.Sprintf("%s%s-%02d", prefixEndpoints, proto, block%endpointShards)
}

// maglevMap is the map holding the Maglev slots of the chains whose
// blocks fall in one shard of one protocol: a plain (not interval) map
// from block offset + slot to address . port. Plain because a table has
// thousands of slots and few runs: an interval is two kernel elements,
// and loading 409,300 slots took 5.8 s as intervals against 2.1 s plain.
// Sharded like the endpoint maps, for the same reason (every element is
// checked against the rules bound to its map).
func maglevMap(proto dataplane.Protocol, block uint32) string {
	return fmt.Sprintf("%s%s-%02d", prefixMaglev, proto, block%endpointShards)
}

// endpointProtocols are the protocols with an endpoint map.
var endpointProtocols = []dataplane.Protocol{dataplane.SCTP, dataplane.TCP, dataplane.UDP}
