package ipvs

import (
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
)

// Set names, without the family prefix (setName adds it).
const (
	setClusterIP     = "CLUSTER-IP"     // cluster IP,proto:port of every service port
	setClusterCIDR   = "CLUSTER-CIDR"   // NodeConfig.cluster_cidrs
	setLoopBack      = "LOOP-BACK"      // endpoint,proto:port,endpoint: hairpin
	setExternalIP    = "EXTERNAL-IP"    // external IP,proto:port, ETP Cluster
	setExternalLocal = "EXTERNAL-LOCAL" // external IP,proto:port, ETP Local
	setLB            = "LB"             // load-balancer IP,proto:port, ETP Cluster
	setLBLocal       = "LB-LOCAL"       // load-balancer IP,proto:port, ETP Local
	setLBFW          = "LB-FW"          // load-balancer IP,proto:port with source ranges
	setLBSource      = "LB-SOURCE"      // load-balancer IP,proto:port,allowed source CIDR
	setHealthCheck   = "HEALTH-CHECK"   // health-check node ports
	setReject        = "REJECT"         // address,proto:port without endpoints anywhere
	setDrop          = "DROP"           // address,proto:port without endpoints for this traffic here
	setServiceIPs    = "SERVICE-IPS"    // every address bound to kube-ipvs0
)

// Set name prefixes. ipset names are global to a namespace, so each
// family has its own; names are at most 31 characters.
const (
	setPrefix4 = "SWYD-IPVS-"
	setPrefix6 = "SWYD-IPVS6-"
)

// Chains, the same in the iptables and ip6tables tables. Not KUBE-*: the
// iptables mode owns those, and both modes coexist while a node switches.
const (
	chainPrefix      = "SWYD-IPVS-"
	chainServices    = chainPrefix + "SERVICES"
	chainNodePort    = chainPrefix + "NODE-PORT"
	chainMarkMasq    = chainPrefix + "MARK-MASQ"
	chainPostrouting = chainPrefix + "POSTROUTING"
	chainInput       = chainPrefix + "INPUT"
	chainForward     = chainPrefix + "FORWARD"

	// masqMark is the bit chainMarkMasq sets: the iptables mode's bit, so
	// either mode's POSTROUTING masquerades while both are installed.
	masqMark = "0x4000"
)

func isOwnedChain(name string) bool { return strings.HasPrefix(name, chainPrefix) }

func isOwnedSet(name string) bool {
	return strings.HasPrefix(name, setPrefix4) || strings.HasPrefix(name, setPrefix6)
}

func setName(fam dataplane.Family, base string) string {
	if fam == dataplane.IPv6 {
		return setPrefix6 + base
	}
	return setPrefix4 + base
}

var nodePortProtocols = []dataplane.Protocol{dataplane.TCP, dataplane.UDP, dataplane.SCTP}

// nodePortSet is the bitmap:port set of node ports of one protocol.
func nodePortSet(p dataplane.Protocol, local bool) string {
	if local {
		return "NODE-PORT-LOCAL-" + p.Upper()
	}
	return "NODE-PORT-" + p.Upper()
}

// setTypes gives each set base name its ipset type.
var setTypes = buildSetTypes()

func buildSetTypes() map[string]string {
	m := map[string]string{
		setClusterIP: "hash:ip,port", setClusterCIDR: "hash:net", setLoopBack: "hash:ip,port,ip",
		setExternalIP: "hash:ip,port", setExternalLocal: "hash:ip,port", setLB: "hash:ip,port",
		setLBLocal: "hash:ip,port", setLBFW: "hash:ip,port", setLBSource: "hash:ip,port,net",
		setHealthCheck: "bitmap:port", setReject: "hash:ip,port", setDrop: "hash:ip,port",
		setServiceIPs: "hash:ip",
	}
	for _, p := range nodePortProtocols {
		m[nodePortSet(p, false)] = "bitmap:port"
		m[nodePortSet(p, true)] = "bitmap:port"
	}
	return m
}

// member adds m to set base of the renderer's family.
func (r *renderer) member(base, m string) {
	r.w.sets[setName(r.fam, base)].Members[m] = true
}

// fixed creates every set of the family (empty sets cost nothing and keep
// the rules independent of the services) and the rules.
func (r *renderer) fixed() {
	fam := ipset.Family(r.fam)
	for base, typ := range setTypes {
		s := &ipset.Set{Spec: ipset.Spec{Name: setName(r.fam, base), Type: typ}, Members: map[string]bool{}}
		if strings.HasPrefix(typ, "hash:") {
			s.Family = fam
		}
		r.w.sets[s.Name] = s
	}
	for _, c := range r.cidrs {
		r.member(setClusterCIDR, netMember(c))
	}
	r.w.rules[r.fam] = r.rules()
}

// rules returns the fixed rules of one family, written as iptables-save
// prints them so a read-back compares equal. They depend only on the
// family and on how cluster IPs are masqueraded (NodeConfig), never on
// the services.
func (r *renderer) rules() ruleset {
	rs := newRuleset()
	set := func(base string) string { return setName(r.fam, base) }
	add := func(table, chain string, parts ...string) {
		rs.chains[table][chain] = append(rs.chains[table][chain], strings.Join(parts, " "))
	}
	match := func(base, dir string) string { return "-m set --match-set " + set(base) + " " + dir }
	const dd = "dst,dst"
	markMasq := "-j " + chainMarkMasq
	localSrc := "-m addrtype --src-type LOCAL"

	add("nat", chainMarkMasq, "-j MARK --set-xmark", masqMark+"/"+masqMark)

	// Masquerade what would otherwise come back to the client from an
	// unexpected address: off-cluster clients of cluster IPs, clients of
	// external addresses with ETP Cluster, node-local clients of ETP
	// Local addresses (their source would be the VIP itself).
	switch {
	case r.masqAll:
		add("nat", chainServices, match(setClusterIP, dd), markMasq)
	case len(r.cidrs) > 0:
		add("nat", chainServices, match(setClusterIP, dd), "-m set ! --match-set", set(setClusterCIDR), "src", markMasq)
	}
	add("nat", chainServices, match(setExternalIP, dd), markMasq)
	add("nat", chainServices, match(setLB, dd), markMasq)
	add("nat", chainServices, localSrc, match(setExternalLocal, dd), markMasq)
	add("nat", chainServices, localSrc, match(setLBLocal, dd), markMasq)
	add("nat", chainServices, "-m addrtype --dst-type LOCAL -j", chainNodePort)
	for _, p := range nodePortProtocols {
		add("nat", chainNodePort, "-p", p.String(), match(nodePortSet(p, false), "dst"), markMasq)
		add("nat", chainNodePort, "-p", p.String(), localSrc, match(nodePortSet(p, true), "dst"), markMasq)
	}
	add("nat", chainPostrouting, `-m comment --comment "hairpin: pod to itself through a service"`,
		match(setLoopBack, "dst,dst,src"), "-j MASQUERADE")
	add("nat", chainPostrouting, "-m mark ! --mark", masqMark+"/"+masqMark, "-j RETURN")
	add("nat", chainPostrouting, "-j MARK --set-xmark", masqMark+"/0x0")
	add("nat", chainPostrouting, `-m comment --comment "kubernetes service traffic requiring SNAT"`,
		"-j MASQUERADE --random-fully")

	unreachable := "icmp-port-unreachable"
	if r.fam == dataplane.IPv6 {
		unreachable = "icmp6-port-unreachable"
	}
	const fresh = "-m conntrack --ctstate NEW"
	add("filter", chainInput, match(setLBFW, dd), "-m set ! --match-set", set(setLBSource), "dst,dst,src", "-j DROP")
	// A TCP reset refuses a connect() on this node at once; an ICMP error
	// only takes effect at the SYN retransmit.
	add("filter", chainInput, "-p tcp", fresh, match(setReject, dd), "-j REJECT --reject-with tcp-reset")
	add("filter", chainInput, fresh, match(setReject, dd), "-j REJECT --reject-with", unreachable)
	add("filter", chainInput, fresh, match(setDrop, dd), "-j DROP")
	add("filter", chainInput, "-p tcp", match(setHealthCheck, "dst"), "-j ACCEPT")
	for _, base := range []string{setClusterIP, setExternalIP, setExternalLocal, setLB, setLBLocal} {
		add("filter", chainInput, match(base, dd), "-j RETURN")
	}
	// Service addresses are local: without this, anything listening on
	// 0.0.0.0 would answer on every other port of them.
	add("filter", chainInput, fresh, match(setServiceIPs, "dst"), "-j REJECT --reject-with", unreachable)
	add("filter", chainForward, "-m conntrack --ctstate INVALID -j DROP")
	add("filter", chainForward, "-m mark --mark", masqMark+"/"+masqMark, "-j ACCEPT")
	add("filter", chainForward, "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT")

	for _, j := range fixedJumps {
		rs.jumps[j.key()] = true
	}
	return rs
}

// fixedJumps enter our chains from the built-in ones; each is inserted at
// the top of its chain.
var fixedJumps = []jump{
	{"nat", "PREROUTING", `-m comment --comment "switchyard ipvs service portals" -j ` + chainServices, chainServices},
	{"nat", "OUTPUT", `-m comment --comment "switchyard ipvs service portals" -j ` + chainServices, chainServices},
	{"nat", "POSTROUTING", `-m comment --comment "switchyard ipvs postrouting rules" -j ` + chainPostrouting, chainPostrouting},
	{"filter", "INPUT", `-m comment --comment "switchyard ipvs service filter" -j ` + chainInput, chainInput},
	{"filter", "FORWARD", `-m comment --comment "switchyard ipvs forwarding rules" -j ` + chainForward, chainForward},
}
