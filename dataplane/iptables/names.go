package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Fixed chains this mode owns. Per-service chains carry one of the
// prefixes below followed by a 16-character hash.
const (
	chainServices         = "KUBE-SERVICES"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainMarkMasq         = "KUBE-MARK-MASQ"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainOffClusterMasq   = "KUBE-MASQ-OFFCLUSTER"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainForward          = "KUBE-FORWARD"
	chainFirewall         = "KUBE-PROXY-FIREWALL"

	prefixSVC   = "KUBE-SVC-"
	prefixSVL   = "KUBE-SVL-"
	prefixEXT   = "KUBE-EXT-"
	prefixFW    = "KUBE-FW-"
	prefixSEP   = "KUBE-SEP-"
	prefixShard = "KUBE-SHARD-"

	// masqMark is the bit KUBE-MARK-MASQ sets and KUBE-POSTROUTING tests.
	masqMark = "0x4000"

	tableNAT    = "nat"
	tableFilter = "filter"
)

// maxChainName is the longest chain name iptables accepts.
const maxChainName = 28

// Hairpin sets, one per family: every endpoint as "ip,proto:port,ip", so
// that one KUBE-POSTROUTING rule marks a pod reaching itself through a
// service for masquerade (kube-proxy's IPVS mode does the same with
// KUBE-LOOP-BACK). Names stay under ipset's 31 characters and clear of
// kube-proxy's set names, which kube-proxy cleanup destroys.
const (
	hairpinSetV4 = "KUBE-SWYD-HAIRPIN"
	hairpinSetV6 = "KUBE-SWYD-HAIRPIN6"
	hairpinType  = "hash:ip,port,ip"
)

var ownedFixedChains = []string{
	chainServices, chainNodePorts, chainMarkMasq, chainPostrouting,
	chainOffClusterMasq, chainExternalServices, chainForward, chainFirewall,
}

var ownedPrefixes = []string{prefixSVC, prefixSVL, prefixEXT, prefixFW, prefixSEP, prefixShard}

// IsOwnedChain reports whether a chain name is one this mode creates.
func IsOwnedChain(name string) bool {
	for _, c := range ownedFixedChains {
		if name == c {
			return true
		}
	}
	for _, p := range ownedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// portID is the identity of one service port: "namespace/name:port/proto",
// as kube-proxy's ServicePortName plus protocol. Chain names hash it, so
// they survive restarts and do not depend on rendering order.
func portID(ns, name, port string, proto dataplane.Protocol) string {
	return ns + "/" + name + ":" + port + "/" + proto.String()
}

// hashName returns prefix + the first 16 base32 characters of the SHA-256
// of the parts: at most 10+16 = 26 characters for the prefixes above.
func hashName(prefix string, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	enc := base32.StdEncoding.EncodeToString(h[:])
	return prefix + enc[:16]
}

func svcChain(id string) string { return hashName(prefixSVC, id) }
func svlChain(id string) string { return hashName(prefixSVL, id) }
func extChain(id string) string { return hashName(prefixEXT, id) }
func fwChain(id string) string  { return hashName(prefixFW, id) }

func sepChain(id string, ep netip.AddrPort) string {
	return hashName(prefixSEP, id, ep.String())
}

func shardChain(i int) string { return fmt.Sprintf("%s%02X", prefixShard, i) }
