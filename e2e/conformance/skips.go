package conformance

import (
	"fmt"
	"regexp"
	"strings"
)

// SkipRule keeps the specs whose full name (containers and leaf, as ginkgo
// matches --ginkgo.skip) matches Pattern out of a run, for Reason.
type SkipRule struct {
	Pattern string // a regexp, valid in Go and so in ginkgo
	Reason  string
}

// BedSkips is what the real-cluster bed cannot run under [sig-network], each
// with why; the first rule that matches gives a spec its reason. Found in
// k8s.io/kubernetes@v1.37.2/test/e2e/network (e2essh, WithProvider, feature
// labels, what the specs exec and which sysctls they read).
//
// Not skipped, deliberately:
//   - [Serial]: under the ginkgo CLI's parallel processes (Options.Parallel)
//     ginkgo runs them last, one at a time with nothing beside them, which
//     is all [Serial] asks; without it every spec runs alone anyway.
//   - [Disruptive]: the two that remain decide for themselves. "should work
//     after restarting kube-proxy" restarts the pods labelled
//     k8s-app=kube-proxy (so it runs against kube-proxy and skips itself,
//     with its message, against Switchyard); "should work after restarting
//     apiserver" skips itself because the API server is not a pod. The one
//     that SSHes is skipped below for that.
//   - [Slow]: slow is not broken; only the LoadBalancer ones are skipped,
//     for the load balancer.
//   - Specs that create a type=LoadBalancer Service but check only its
//     ClusterIP, NodePort or health-check node port (no [Feature:LoadBalancer]
//     label): they need no cloud provider.
func BedSkips() []SkipRule { return bedSkips(false) }

// DualStackBedSkips is BedSkips for a dual-stack bed (cluster.Config
// DualStack): the [Feature:IPv6DualStack] specs (test/e2e/network/
// dual_stack.go, 24 at v1.37.2) run, but for the SCTP one; the IPv6
// Internet spec stays skipped, for the Internet.
func DualStackBedSkips() []SkipRule { return bedSkips(true) }

// featureExceptDualStack matches "[Feature:" followed by anything but
// "IPv6DualStack]": Go's regexp (and so ginkgo's) has no negative
// lookahead, so the catch-all rule spells out the names it lets through.
const featureExceptDualStack = `\[Feature:(?:[^I]|I[^P]|IP[^v]|IPv[^6]|IPv6[^D])`

func bedSkips(dualStack bool) []SkipRule {
	family := []SkipRule{{`IPv6DualStack|\[Feature:Networking-IPv6\]`,
		"the bed is IPv4-only (single-stack pod and Service CIDRs)"}}
	catchAll := `\[Feature:`
	if dualStack {
		family = []SkipRule{{`\[Feature:Networking-IPv6\]`,
			"needs the Internet from pods over IPv6; the bed's network ends at its bridge"}}
		catchAll = featureExceptDualStack
	}
	// The family rules stand where the IPv4-only one always stood, so the
	// IPv4 table (and the skip regexp every results file records) is
	// unchanged.
	rules := []SkipRule{
		{`should recreate its iptables rules if they are deleted`,
			"SSHes to every node (e2essh: sudo iptables-save) with an SSH key; the bed's nodes are namespaces with no sshd"},
		{`\[Provider:`,
			"tagged for a cloud provider; the bed runs e2e.test with --provider=local"},
		{`\[Feature:LoadBalancer\]`,
			"needs a cloud load-balancer controller; the bed has no cloud provider, so LoadBalancer Services stay pending"},
	}
	rules = append(rules, family...)
	return append(rules, []SkipRule{
		{`SCTP`,
			"this kernel has no SCTP (no /proc/net/sctp), and the bed loads no kernel module on the machine"},
		{`\[Feature:NetworkPolicy\]`,
			"the bed's CNI (bridge, host-local) enforces no NetworkPolicy; not a service proxy's job"},
		{`\[Feature:Networking-IPv4\]|\[Feature:Networking-DNS\]`,
			"needs the Internet from pods; the bed's network ends at its bridge"},
		{`\[Feature:LocalhostNodePorts\]|\[Feature:KubeProxyNFAcct\]`,
			"opt-in kube-proxy iptables-mode extras (127.0.0.1:NodePort, nfacct metrics), not Service behaviour"},
		{`\[Feature:Networking-Performance\]|\[Feature:PerformanceDNS\]`,
			"a benchmark (iperf2, DNS at the maximum Service count), not pass/fail; too heavy for the 2-core bed"},
		{catchAll,
			"an opt-in [Feature:…] spec for a component or setting the bed does not enable"},
		{`DNS configMap nameserver Forward PTR lookup`,
			"needs the Internet: it first resolves the PTR of 8.8.8.8 through the cluster DNS's public upstream; the bed's network ends at its bridge"},
		{`KubeProxy should set TCP CLOSE_WAIT timeout`,
			"checks that the proxy set nf_conntrack_tcp_timeout_close_wait to 1h; the bed lets no proxy write conntrack sysctls (kube-proxy runs with conntrack.tcpCloseWaitTimeout 0s, Switchyard writes none)"},
	}...)
}

// SkipRegexp joins the rules' patterns into one --ginkgo.skip regexp.
func SkipRegexp(rules []SkipRule) string {
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = "(?:" + r.Pattern + ")"
	}
	return strings.Join(parts, "|")
}

// SkipReason is the reason of the first rule whose pattern matches name.
func SkipReason(rules []SkipRule, name string) (string, bool, error) {
	for _, r := range rules {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return "", false, fmt.Errorf("skip rule %q: %w", r.Pattern, err)
		}
		if re.MatchString(name) {
			return r.Reason, true, nil
		}
	}
	return "", false, nil
}

// RecordSkips gives every spec of r that was skipped with no reason (the
// ones --ginkgo.skip filtered out) the reason of its rule, or, for a spec
// only the user's skip regexp matched, that regexp. It returns how many
// specs it gave a reason.
func RecordSkips(r *Results, rules []SkipRule) (int, error) {
	n := 0
	for name, s := range r.Specs {
		if s.Outcome != Skipped || s.Reason != "" {
			continue
		}
		reason, ok, err := SkipReason(rules, name)
		if err != nil {
			return n, err
		}
		switch {
		case ok:
		case r.Skip != "":
			reason = "matched -skip " + r.Skip
		default:
			reason = "skipped with no message"
		}
		s.Reason = "not run on the bed: " + reason
		r.Specs[name] = s
		n++
	}
	return n, nil
}
