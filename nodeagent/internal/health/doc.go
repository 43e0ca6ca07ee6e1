// Package health is the agent's /healthz and /livez, with kube-proxy's
// semantics: the agent is unhealthy when an update has been queued for
// longer than the health timeout without a successful sync since. The body
// has kube-proxy's JSON shape: lastUpdated, currentTime, nodeName,
// nodeHealthy.
//
// Invariants: a node with nothing queued is healthy (static stability: an
// agent cut off from its control plane keeps forwarding, and that is not a
// failure of the proxy); Updated clears the queued mark.
package health
