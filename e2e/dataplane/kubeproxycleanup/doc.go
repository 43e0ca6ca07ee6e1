// Package kubeproxycleanup proves dataplane/kubeproxycleanup against a real
// kernel, in a throwaway network namespace (testbed/netns; never the
// machine's own): kube-proxy-shaped iptables chains, nftables tables,
// kube-ipvs0 and ipsets are installed, the cleanup removes them while
// kubelet's and foreign rules survive, and a second run on Switchyard's own
// iptables rules (same chain names, no kube-proxy evidence) changes
// nothing. Needs root; skips otherwise.
package kubeproxycleanup
