package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
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

// jumpComment is the comment match of this mode's jump for what,
// kube-proxy's text for the same jump after xtables.OwnJumpPrefix. The
// prefix is what lets a node go from this mode to kube-proxy's nftables
// mode without a gap: at every start that mode deletes the iptables
// mode's jumps by their exact specification, then flushes and deletes
// KUBE-SERVICES and the other chains in one iptables-restore per table.
// Jumps specified as kube-proxy's went with the first step, and the node
// forwarded no new connection until kube-proxy's first sync (seen on the
// real-cluster bed). This mode's jumps stay, still reference those
// chains, and so fail each of those restores as a whole: the node keeps
// this mode's rules until kube-proxy's own forward and the agent removes
// them. Where kube-proxy's iptables mode runs beside it, each proxy keeps
// its own jumps to the shared chains (a packet walks KUBE-SERVICES twice
// only if the first walk did not translate it).
func jumpComment(what string) string {
	return `-m comment --comment "` + xtables.OwnJumpPrefix + what + `"`
}

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
// as kube-proxy's ServicePortName plus protocol, for maps keyed by port.
func portID(ns, name, port string, proto dataplane.Protocol) string {
	return ns + "/" + name + ":" + port + "/" + proto.String()
}

// portHashKey is what kube-proxy's iptables mode hashes into a service port's
// chain names: its ServicePortName ("namespace/name", then ":port" for a
// named port) followed by the protocol in lower case. Hashing the same
// bytes gives the same names as kube-proxy (KUBE-SVC-TCOU7JCQXEZGVUNU is
// kube-system/kube-dns:dns over UDP on either proxy), so each proxy's
// iptables-restore rewrites the other's chains of a Service in place, and
// neither sees the other's as stale: kube-proxy deletes chains with its
// prefixes that it does not want, and a delete fails (failing its whole
// restore) while a chain of ours still jumps there.
func portHashKey(ns, name, port string, proto dataplane.Protocol) string {
	key := ns + "/" + name
	if port != "" {
		key += ":" + port
	}
	return key + proto.String()
}

// hashName returns prefix + the first 16 base32 characters of the SHA-256
// of key, kube-proxy's portProtoHash: at most 10+16 = 26 characters for
// the prefixes above.
func hashName(prefix, key string) string {
	h := sha256.Sum256([]byte(key))
	enc := base32.StdEncoding.EncodeToString(h[:])
	return prefix + enc[:16]
}

func svcChain(key string) string { return hashName(prefixSVC, key) }
func svlChain(key string) string { return hashName(prefixSVL, key) }
func extChain(key string) string { return hashName(prefixEXT, key) }
func fwChain(key string) string  { return hashName(prefixFW, key) }

// sepChain is kube-proxy's servicePortEndpointChainName: the endpoint's
// "ip:port" ("[ip]:port" for IPv6) after the port's key.
func sepChain(key string, ep netip.AddrPort) string {
	return hashName(prefixSEP, key+ep.String())
}

func shardChain(i int) string { return fmt.Sprintf("%s%02X", prefixShard, i) }
