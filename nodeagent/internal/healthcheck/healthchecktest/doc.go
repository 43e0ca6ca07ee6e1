// Package healthchecktest serves the health check node ports of a test on
// free loopback ports and reads them: Ports is a healthcheck.Config.Listen
// that remembers where each node port really listens, and Get fetches a
// health check (or /healthz) the way a load balancer probes it.
//
// Invariant: a test never binds the node ports it names, so tests run in
// parallel and without privileges.
package healthchecktest
