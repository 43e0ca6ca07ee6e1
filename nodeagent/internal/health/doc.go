// Package health is the agent's /healthz and /livez, with kube-proxy's
// semantics: the agent is unhealthy when an update has been queued for
// longer than the health timeout without a successful sync since. The body
// has kube-proxy's JSON shape: lastUpdated, currentTime, nodeName,
// nodeHealthy.
//
// /healthz also means the datapath: with the datapath canary on (package
// canary), it is 503 while the canary's probe through the programmed
// rules fails, so the load-balancer health-check node ports (which ask
// Healthy) follow. /livez does not: restarting an agent repairs nothing
// a foreign DROP broke, and the DaemonSet's liveness probe would only
// turn that into a crash loop.
//
// Invariants: a node with nothing queued is healthy (static stability: an
// agent cut off from its control plane keeps forwarding, and that is not a
// failure of the proxy); Updated clears the queued mark; a datapath that
// was never probed counts as healthy (the prober reports only after the
// first successful sync).
package health
