// Package bench is the benchmark harness of issue 9: fan-out (one control
// plane, many agents) and API load (watches on kube-apiserver for one
// control plane versus one kube-proxy per node).
//
// Fan-out: the control plane runs as its own process, so its CPU time
// (/proc/<pid>/stat) and peak RSS (VmHWM) are its own; the agents are
// goroutines of the harness (package agentsim), each with its own gRPC
// connection over loopback. Changes reach the control plane one of two
// ways:
//
//	path a (apiserver): harness ──Update──▶ kube-apiserver+etcd ──watch──▶ switchyard-controlplane ──gRPC──▶ agents
//	path b (fake):      harness ──POST /apply──▶ switchyard-benchcp (fake clientset ─▶ same daemon) ──gRPC──▶ agents
//
// Each change moves one endpoint of one service, which changes that
// service's view on every node. The harness writes it, waits until every
// agent ACKed the batch carrying it, and records per agent the time from
// the write to the ACK, and the wire bytes every agent received. Changes
// are strictly sequential: the next is written once every agent ACKed.
// The same runs against StreamSnapshots (whole view per change) give the
// delta/state-of-the-world ratio.
//
// API load: the API server's own /metrics (apiserver_registered_watchers,
// apiserver_longrunning_requests{verb="WATCH"}) for one control plane with
// N agents, for N client-go informer sets shaped like kube-proxy's, and for
// N real kube-proxy processes, each in a throwaway network namespace.
//
// Output: one Record per run as JSON lines, and a markdown table of
// min/median over repetitions (report.go).
package bench
