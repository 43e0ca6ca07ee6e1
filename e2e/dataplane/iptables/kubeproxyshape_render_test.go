package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The rendering half of kubeProxyShape: one service at a time, into its
// own nat chains and its rules in the shared ones, in kube-proxy's
// structure (a KUBE-SEP chain per endpoint, the hairpin mark in it).

// kpName is a chain name as kube-proxy builds them: a prefix and 16
// base32 characters of a hash of what the chain is for.
func kpName(prefix string, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "/")))
	return prefix + base32.StdEncoding.EncodeToString(h[:])[:16]
}

func kpComment(s string) string { return `-m comment --comment "` + s + `"` }

// entry adds a rule to a shared chain.
func (s *kpService) entry(table, chain string, args ...string) {
	c := kpChain{table, chain}
	s.shared[c] = append(s.shared[c], strings.Join(args, " "))
}

// rule adds a rule to one of the service's own nat chains.
func (s *kpService) rule(chain string, args ...string) {
	s.own[chain] = append(s.own[chain], strings.Join(args, " "))
}

// renderKubeProxy renders one service in kube-proxy's shape; input the
// modes would skip is left out silently.
func renderKubeProxy(name string, sv *switchyardv1.ServiceView, node serviceport.Node) *kpService {
	s := &kpService{view: sv, own: map[string][]string{}, shared: map[kpChain][]string{}}
	svc, ok := serviceport.Read(name, sv, dataplane.IPv4, func(string, string) {})
	if !ok {
		return s
	}
	if hc := svc.HealthCheckNodePort; hc > 0 {
		s.entry("filter", "KUBE-NODEPORTS", kpComment(svc.Name+" health check node port"),
			fmt.Sprintf("-p tcp -m tcp --dport %d -j ACCEPT", hc))
	}
	for i := range svc.Ports {
		p := kpPort{Port: &svc.Ports[i], s: s, node: node, id: svc.Name + ":" + svc.Ports[i].Name + "/" + svc.Ports[i].Protocol.String()}
		p.render()
	}
	return s
}

// kpPort is one service port being rendered.
type kpPort struct {
	*serviceport.Port
	s    *kpService
	node serviceport.Node
	id   string // "namespace/name:port/protocol", hashed into chain names
}

func (p *kpPort) match() string { return "-p " + p.Protocol.String() + " -m " + p.Protocol.String() }
func (p *kpPort) dport() string { return fmt.Sprintf("--dport %d", p.Port.Port) }

// refuse is the filter verdict for traffic no endpoint takes.
func (p *kpPort) refuse(v serviceport.Verdict) string {
	switch {
	case v == serviceport.Drop:
		return "DROP"
	case p.Protocol == dataplane.TCP:
		return "REJECT --reject-with tcp-reset"
	}
	return "REJECT"
}

func (p *kpPort) render() {
	svc, svl := kpName("KUBE-SVC-", p.id), kpName("KUBE-SVL-", p.id)
	ext, fw := kpName("KUBE-EXT-", p.id), kpName("KUBE-FW-", p.id)
	internal := svc
	if p.Internal.Local {
		internal = svl
	}
	for _, ip := range p.ClusterIPs {
		if p.Internal.Serves() {
			p.s.entry("nat", "KUBE-SERVICES", kpComment(p.Label+" cluster IP"), p.match(), "-d", ip.String(), p.dport(), "-j", internal)
		} else {
			p.s.entry("filter", "KUBE-SERVICES", kpComment(p.Label+" has no endpoints"), p.match(), "-d", ip.String(), p.dport(),
				"-j", p.refuse(p.Internal.NoEndpoints))
		}
	}
	p.external(p.ExternalIPs, "external IP", ext)
	lb := ext
	if p.HasRanges {
		lb = fw
		for _, ip := range p.LBIPs {
			p.s.entry("filter", "KUBE-PROXY-FIREWALL", kpComment(p.Label+" traffic not accepted by "+fw), p.match(),
				"-d", ip.String(), p.dport(), "-j DROP")
		}
	}
	p.external(p.LBIPs, "loadbalancer IP", lb)
	if p.NodePort > 0 {
		np := fmt.Sprintf("--dport %d", p.NodePort)
		if p.UsesExternal() {
			p.s.entry("nat", "KUBE-NODEPORTS", kpComment(p.Label), p.match(), np, "-j", ext)
		}
		if !p.External.Serves() {
			p.s.entry("filter", "KUBE-EXTERNAL-SERVICES", kpComment(p.Label+" has no local endpoints"),
				"-m addrtype --dst-type LOCAL", p.match(), np, "-j", p.refuse(p.External.NoEndpoints))
		}
	}
	if len(p.Cluster) > 0 {
		p.balance(svc, p.Cluster, !p.Internal.Local)
	}
	if p.UsesLocal() {
		p.balance(svl, p.Local, false)
	}
	if p.UsesExternal() {
		p.extChain(ext, svc, svl)
		if p.HasRanges && len(p.LBIPs) > 0 {
			for _, src := range p.SourceRanges {
				p.s.rule(fw, kpComment(p.Label+" loadbalancer IP"), "-s", src.String(), "-j", ext)
			}
		}
	}
}

// external writes the entry rules of external or load-balancer
// addresses, and their filter verdict when no endpoint takes them.
func (p *kpPort) external(ips []netip.Addr, kind, target string) {
	for _, ip := range ips {
		if p.UsesExternal() {
			p.s.entry("nat", "KUBE-SERVICES", kpComment(p.Label+" "+kind), p.match(), "-d", ip.String(), p.dport(), "-j", target)
		}
		if !p.External.Serves() {
			p.s.entry("filter", "KUBE-EXTERNAL-SERVICES", kpComment(p.Label+" has no local endpoints"), p.match(),
				"-d", ip.String(), p.dport(), "-j", p.refuse(p.External.NoEndpoints))
		}
	}
}

// balance writes a KUBE-SVC or KUBE-SVL chain: the masquerade check of
// off-cluster sources (masq), the affinity checks, the random choice of
// a KUBE-SEP chain, and those chains: hairpin mark, then DNAT.
func (p *kpPort) balance(chain string, eps []serviceport.Endpoint, masq bool) {
	p.s.own[chain] = []string{}
	for _, ip := range p.ClusterIPs {
		c := kpComment(p.Label + " cluster IP")
		switch {
		case !masq:
		case p.node.MasqueradeAll:
			p.s.rule(chain, c, p.match(), "-d", ip.String(), p.dport(), "-j KUBE-MARK-MASQ")
		case len(p.node.ClusterCIDRs) > 0:
			p.s.rule(chain, c, p.match(), "! -s", p.node.ClusterCIDRs[0].String(), "-d", ip.String(), p.dport(), "-j KUBE-MARK-MASQ")
		}
	}
	seps := make([]string, len(eps))
	for i, ep := range eps {
		seps[i] = kpName("KUBE-SEP-", p.id, ep.Addr.String())
		if p.Affinity > 0 {
			p.s.rule(chain, kpComment(p.Label+" -> "+ep.Addr.String()), "-m recent --name", seps[i],
				fmt.Sprintf("--rcheck --seconds %d --reap", p.Affinity), "-j", seps[i])
		}
	}
	for i, ep := range eps {
		args := []string{kpComment(p.Label + " -> " + ep.Addr.String())}
		if left := len(eps) - i; left > 1 {
			args = append(args, fmt.Sprintf("-m statistic --mode random --probability %0.10f", 1.0/float64(left)))
		}
		p.s.rule(chain, append(args, "-j", seps[i])...)
		if _, done := p.s.own[seps[i]]; done {
			continue // in the cluster and the local set
		}
		recent := ""
		if p.Affinity > 0 {
			recent = " -m recent --name " + seps[i] + " --set"
		}
		p.s.rule(seps[i], kpComment(p.Label), "-s", ep.Addr.Addr().String(), "-j KUBE-MARK-MASQ")
		p.s.rule(seps[i], kpComment(p.Label), p.match()+recent, "-j DNAT --to-destination", ep.Addr.String())
	}
}

// extChain writes KUBE-EXT: masquerade and the policy's chain, or under
// a Local policy the short-circuits of node and pod traffic.
func (p *kpPort) extChain(ext, svc, svl string) {
	if !p.External.Local {
		p.s.rule(ext, kpComment("masquerade traffic for "+p.Label+" external destinations"), "-j KUBE-MARK-MASQ")
		p.s.rule(ext, "-j", svc)
		return
	}
	if p.ShortCircuit {
		for _, c := range p.node.ClusterCIDRs {
			p.s.rule(ext, kpComment("pod traffic for "+p.Label+" external destinations"), "-s", c.String(), "-j", svc)
		}
	}
	p.s.rule(ext, kpComment("masquerade LOCAL traffic for "+p.Label+" external destinations"), "-m addrtype --src-type LOCAL -j KUBE-MARK-MASQ")
	if p.ShortCircuit {
		p.s.rule(ext, kpComment("route LOCAL traffic for "+p.Label+" external destinations"), "-m addrtype --src-type LOCAL -j", svc)
	}
	if p.External.Serves() {
		p.s.rule(ext, "-j", svl)
	}
}
