package conformance

import "regexp"

// Explanation is the analysis of a failure e2e.test's message alone does
// not give: for the proxies matching Proxy and the specs matching Spec
// (regexps), why the spec fails there.
type Explanation struct {
	Proxy, Spec string
	Why         string
}

// Explanations are the known failures of the matrix, each found on the bed
// and explained; CONFORMANCE.md prints Why on the failure's row.
func Explanations() []Explanation {
	const us = `^switchyard-userspace$`
	relay := "userspace mode by design: the agent relays each connection from its own socket, so the backend sees " +
		"the node's address, not the client's (kube-proxy's removed userspace mode did the same); the netfilter modes pass this spec"
	return []Explanation{
		{us, `should preserve source pod IP for traffic thru service cluster IP`, relay},
		{us, `should support externalTrafficPolicy=Local for type=NodePort`, relay},
		{us, `should implement NodePort and HealthCheckNodePort correctly when ExternalTrafficPolicy changes`, relay},
		{us, `DNS HostNetwork .*ClusterFirstWithHostNet`,
			"userspace mode by design: the agent listens on each Service port at its cluster IP in the node's namespace, " +
				"so the spec's hostNetwork webserver cannot bind :80 on the wildcard address (its log: \"listen tcp :80: bind: address already in use\"); " +
				"the netfilter modes hold no sockets and pass"},
		{us, `should be possible to connect to a service via ExternalIP when the external IP is not assigned to a node`,
			"userspace mode by design: it serves only addresses a socket can be bound to on the node (its own and the Service range, " +
				"which deploy/components/userspace makes local); traffic to an external IP no node has never reaches the node's sockets, " +
				"where the netfilter modes DNAT it on its way through"},
		{us, `Service CIDRs should create Services and serve on different Service CIDRs`,
			"userspace mode, not yet done: deploy/components/userspace makes only the install-time Service range (10.96.0.0/12) local; " +
				"the spec adds a ServiceCIDR at run time and the agent does not yet route NodeConfig service_cidrs to its sockets"},
	}
}

// Explain returns the first explanation matching proxy and spec, or "".
func Explain(rules []Explanation) func(proxy, spec string) string {
	return func(proxy, spec string) string {
		for _, e := range rules {
			if regexp.MustCompile(e.Proxy).MatchString(proxy) && regexp.MustCompile(e.Spec).MatchString(spec) {
				return e.Why
			}
		}
		return ""
	}
}
