// Package system runs the whole of Switchyard for real and tests it end to
// end: the test bed's etcd + kube-apiserver, the real switchyard-controlplane
// binary, and one real switchyard-agent (iptables mode) per node namespace,
// with echo-server pods and real connections.
//
// Connectivity: the API server and the control plane run in the machine's
// own network namespace on loopback (neither touches the kernel's network
// configuration); the control plane serves gRPC on a unix socket
// (--listen unix:///…/cp.sock). A unix socket is a file-system object, so
// the agents, started inside their node namespaces with `ip netns exec`,
// reach it with --control-plane unix:///…/cp.sock although they cannot see
// the host's loopback. Each agent's iptables calls therefore program only its
// node namespace; nothing is ever programmed in the machine's namespace.
//
// Cluster (cluster.go) is the reusable harness, used by the tests here and
// by e2e/cmd/demo. Start needs root and the test-bed binaries; Close stops
// agents by PID before the namespaces are deleted, then the control plane
// and the API server.
package system
