package iptables_test

import (
	"strings"
	"testing"
)

// kubeProxyJumps are kube-proxy's iptables mode's jumps from built-in
// chains as its CleanupLeftovers deletes them, by exact specification
// (k8s.io/kubernetes pkg/proxy/iptables, iptablesJumpChains, v1.37).
var kubeProxyJumps = []struct{ table, rule string }{
	{"filter", `INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`},
	{"filter", `FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`},
	{"filter", `INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`},
	{"filter", `FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"filter", `OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"filter", `FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD`},
	{"filter", `INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`},
	{"filter", `OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`},
	{"filter", `FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`},
	{"nat", `OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"nat", `PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`},
	{"nat", `POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`},
}

// TestKubeProxyNFTablesStartLeavesRules is what kube-proxy's nftables mode
// does at every start (platformCleanup → iptables CleanupLeftovers) on a
// node this mode programs: delete its iptables mode's jumps one by one,
// then flush and delete KUBE-SERVICES, KUBE-POSTROUTING, KUBE-MARK-MASQ
// and the per-service chains in one restore per table. None of the
// deletes may find a jump of ours, and each restore must fail whole on a
// chain our jumps still reference: the node forwards through this mode's
// rules until kube-proxy's first sync (names.go, jumpComment).
func TestKubeProxyNFTablesStartLeavesRules(t *testing.T) {
	f, _ := applied(t, state(5))
	before := f.Dump()
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, j := range kubeProxyJumps {
			if err := f.Restore(fam, "*"+j.table+"\n-D "+j.rule+"\nCOMMIT\n"); err == nil {
				t.Errorf("%s -t %s -D %s: deleted a rule of ours", fam, j.table, j.rule)
			}
		}
		saved := f.Dump()
		var nat, filter strings.Builder
		nat.WriteString("*nat\n")
		var natDel []string
		for _, c := range []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"} {
			nat.WriteString(":" + c + " - [0:0]\n")
			natDel = append(natDel, "-X "+c)
		}
		for line := range strings.Lines(saved) {
			if name, ok := strings.CutPrefix(line, ":KUBE-SVC-"); ok {
				c := "KUBE-SVC-" + strings.Fields(name)[0]
				nat.WriteString(":" + c + " - [0:0]\n")
				natDel = append(natDel, "-X "+c)
			}
		}
		nat.WriteString(strings.Join(natDel, "\n") + "\nCOMMIT\n")
		filter.WriteString("*filter\n")
		var filterDel []string
		for _, c := range []string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL"} {
			filter.WriteString(":" + c + " - [0:0]\n")
			filterDel = append(filterDel, "-X "+c)
		}
		filter.WriteString(strings.Join(filterDel, "\n") + "\nCOMMIT\n")
		for _, p := range []string{nat.String(), filter.String()} {
			if err := f.Restore(fam, p); err == nil {
				t.Errorf("%s: kube-proxy's clean-up restore succeeded on our chains:\n%s", fam, p)
			} else if !strings.Contains(err.Error(), "referenced") {
				t.Errorf("%s: the restore failed, but not on a referenced chain: %v", fam, err)
			}
		}
	}
	if after := f.Dump(); after != before {
		t.Errorf("the rules changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
