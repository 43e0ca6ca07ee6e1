package kubeproxycleanup

import (
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/kubeproxycleanup"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// kubeProxyRules is kube-proxy's iptables mode on a node, plus kubelet's
// chains and foreign rules that must survive.
const kubeProxyRules = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*nat
:CNI-HOSTPORT-MASQ - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SEP-AAAAAAAAAAAAAAAA - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-BBBBBBBBBBBBBBBB - [0:0]
:KUBE-EXT-BBBBBBBBBBBBBBBB - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -s 10.88.0.0/16 -m comment --comment "foreign masquerade" -j MASQUERADE
-A POSTROUTING -m comment --comment "foreign hostport" -j CNI-HOSTPORT-MASQ
-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MASQUERADE
-A KUBE-SEP-AAAAAAAAAAAAAAAA -s 10.244.0.5/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-AAAAAAAAAAAAAAAA -p tcp -m tcp -j DNAT --to-destination 10.244.0.5:8080
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-BBBBBBBBBBBBBBBB
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-EXT-BBBBBBBBBBBBBBBB
-A KUBE-EXT-BBBBBBBBBBBBBBBB -j KUBE-SVC-BBBBBBBBBBBBBBBB
-A KUBE-SVC-BBBBBBBBBBBBBBBB -j KUBE-SEP-AAAAAAAAAAAAAAAA
COMMIT
*filter
:FOREIGN-FW - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -j KUBE-FIREWALL
-A INPUT -p tcp -m tcp --dport 2222 -j FOREIGN-FW
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FOREIGN-FW -j ACCEPT
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment "default/empty has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
COMMIT
`

const kubeProxyRules6 = `*nat
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
COMMIT
`

const nftState = `table ip kube-proxy {
	chain services { }
}
table ip6 kube-proxy {
	chain services { }
}
table inet foreign {
	chain input { type filter hook input priority 0; tcp dport 2222 accept; }
}
`

type bed struct {
	t    *testing.T
	topo *netns.Topology
	node netns.Node
	// r runs every command inside the node namespace (ip netns exec,
	// behind the topology's host guard).
	r *dptest.Runner
}

func (b *bed) run(argv ...string) string {
	b.t.Helper()
	out, err := b.r.Run(b.t.Context(), argv, nil)
	if err != nil {
		b.t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return string(out)
}

func (b *bed) runInput(stdin string, argv ...string) {
	b.t.Helper()
	if _, err := b.r.Run(b.t.Context(), argv, []byte(stdin)); err != nil {
		b.t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
}

// try runs a command whose failure means the kernel lacks a feature.
func (b *bed) try(argv ...string) bool {
	_, err := b.r.Run(b.t.Context(), argv, nil)
	if err != nil {
		b.t.Logf("%s: %v (feature not available; that part is skipped)", strings.Join(argv, " "), err)
	}
	return err == nil
}

var counters = regexp.MustCompile(`(?m)^#.*$|\[\d+:\d+\]`)

// save is iptables-nft-save without comments and counters.
func (b *bed) save(bin string) string {
	return counters.ReplaceAllString(b.run(bin), "")
}

func TestRemovesKubeProxyStateKeepsForeign(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: 1})
	b := &bed{t: t, topo: topo, node: topo.Node(0)}
	b.r = dptest.NewRunner(topo, b.node.NS, dptest.RunnerOptions{})

	b.runInput(kubeProxyRules, "iptables-nft-restore", "--noflush")
	b.runInput(kubeProxyRules6, "ip6tables-nft-restore", "--noflush")
	b.runInput(nftState, "nft", "-f", "-")
	link := b.try("ip", "link", "add", "kube-ipvs0", "type", "dummy") ||
		b.try("ip", "link", "add", "kube-ipvs0", "type", "bridge") // kernels without dummy
	if link {
		b.run("ip", "addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0")
	}
	sets := b.try("ipset", "create", "KUBE-CLUSTER-IP", "hash:ip,port")
	if sets {
		b.run("ipset", "create", "KUBE-DST-FOREIGN", "hash:ip")
	}

	res, err := kubeproxycleanup.Run(t.Context(), kubeproxycleanup.Config{Runner: b.r, Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	t.Logf("evidence %v; deleted %d chains, flushed %v, nft %v, links %v, ipsets %v",
		res.Evidence, len(res.Chains), res.FlushedChains, res.NFTTables, res.Links, res.IPSets)

	v4 := b.save("iptables-nft-save")
	for _, gone := range []string{"KUBE-PROXY-CANARY", "KUBE-SERVICES", "KUBE-SVC-", "KUBE-SEP-", "KUBE-EXT-",
		"KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL", "KUBE-EXTERNAL-SERVICES", "kubernetes service portals"} {
		if strings.Contains(v4, gone) {
			t.Errorf("%s survived:\n%s", gone, v4)
		}
	}
	for _, kept := range []string{
		":KUBE-IPTABLES-HINT", ":KUBE-KUBELET-CANARY", ":KUBE-FIREWALL", "-A INPUT -j KUBE-FIREWALL",
		`"foreign masquerade" -j MASQUERADE`, "-A INPUT -p tcp -m tcp --dport 2222 -j FOREIGN-FW", "-A FOREIGN-FW -j ACCEPT",
		// A foreign chain jumps to KUBE-MARK-MASQ: kept, but empty.
		":KUBE-MARK-MASQ", "-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j KUBE-MARK-MASQ",
	} {
		if !strings.Contains(v4, kept) {
			t.Errorf("%q did not survive:\n%s", kept, v4)
		}
	}
	if strings.Contains(v4, "-A KUBE-MARK-MASQ") {
		t.Errorf("KUBE-MARK-MASQ not flushed:\n%s", v4)
	}
	if v6 := b.save("ip6tables-nft-save"); strings.Contains(v6, "KUBE-") {
		t.Errorf("ip6tables kept kube-proxy chains:\n%s", v6)
	}
	tables := b.run("nft", "list", "tables")
	if strings.Contains(tables, "kube-proxy") || !strings.Contains(tables, "table inet foreign") {
		t.Errorf("nft tables after cleanup:\n%s", tables)
	}
	if _, err := b.r.Run(t.Context(), []string{"ip", "link", "show", "kube-ipvs0"}, nil); link && err == nil {
		t.Error("kube-ipvs0 survived")
	}
	if sets {
		if got := b.run("ipset", "list", "-n"); strings.Contains(got, "KUBE-CLUSTER-IP") || !strings.Contains(got, "KUBE-DST-FOREIGN") {
			t.Errorf("ipsets after cleanup:\n%s", got)
		}
	}

	// Switchyard takes over: its first (full) sync writes its rules, with
	// the same chain names. An agent restart with the flag still set must
	// not touch them.
	dp, err := iptables.New(iptables.Config{Runner: b.r, Families: []dataplane.Family{dataplane.IPv4}, Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := dp.Apply(t.Context(), b.state(), dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Switchyard sync after cleanup: %v", err)
	}
	ours := b.save("iptables-nft-save")
	if !strings.Contains(ours, "-j KUBE-SERVICES") || !strings.Contains(ours, ":KUBE-SVC-") {
		t.Fatalf("Switchyard's rules missing after its sync:\n%s", ours)
	}
	again, err := kubeproxycleanup.Run(t.Context(), kubeproxycleanup.Config{Runner: b.r, Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatalf("second cleanup: %v", err)
	}
	if again.Found() {
		t.Errorf("second run found kube-proxy evidence %v in Switchyard's rules", again.Evidence)
	}
	if after := b.save("iptables-nft-save"); after != ours {
		t.Errorf("second run changed Switchyard's rules:\nbefore:\n%s\nafter:\n%s", ours, after)
	}
}

func (b *bed) state() *dataplane.State {
	sv := &switchyardv1.ServiceView{
		Namespace: "default", Name: "web", Type: switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT,
		ClusterIps: []string{"10.96.0.10"},
		Ports: []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP,
			Port: 80, NodePort: 30080}},
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HasAnyEndpoints:       true,
		ClusterEndpoints: []*switchyardv1.Endpoint{{
			Address: b.topo.Pods()[0].IP.String(), Ready: true, Serving: true,
			Ports: []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}},
		}},
	}
	return &dataplane.State{
		Config: &switchyardv1.NodeConfig{NodeName: b.node.Name,
			ClusterCidrs: []string{"10.244.0.0/16"}, NodeIps: []string{b.node.IP.String()}},
		Services: map[string]*switchyardv1.ServiceView{"default/web": sv},
	}
}
