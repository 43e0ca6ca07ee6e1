// Package healthcheck serves load-balancer health checks on node ports, as
// kube-proxy does: for every LoadBalancer service with
// externalTrafficPolicy Local (a non-zero health_check_node_port), an HTTP
// server on that port answers 200 with the count of ready local endpoints
// when there is at least one, and 503 when there is none or the proxy is
// unhealthy. The body is kube-proxy's JSON:
//
//	{"service":{"namespace":"ns","name":"svc"},"localEndpoints":1,"serviceProxyHealthy":true}
//
// Invariants: Sync starts a server for each new port, stops the servers of
// ports no longer wanted and updates counts in place; Close stops all and
// waits for their goroutines.
package healthcheck
