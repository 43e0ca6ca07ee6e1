// Package system runs the whole of Switchyard for real and tests it end to
// end: the test bed's etcd + kube-apiserver, the real switchyard-controlplane
// binary (one or more replicas), and one real switchyard-agent (iptables
// mode) per node namespace, with echo-server pods (TCP and UDP on :8080)
// and real connections.
//
// Connectivity: the API server and the control planes run in the machine's
// own network namespace on loopback (neither touches the kernel's network
// configuration; the control planes start as launch.Spec Loopback); each
// replica serves gRPC on a unix socket (--listen unix:///…/cp-<i>.sock). A
// unix socket is a file-system object, so the agents, started inside their
// node namespaces by package launch (nsenter --net, after the topology's
// host guard), reach it with
// --control-plane unix:///…/cp-0.sock,unix:///…/cp-1.sock although they
// cannot see the host's loopback. Each agent's iptables calls therefore
// program only its node namespace; nothing is ever programmed in the
// machine's namespace.
//
// With Config.TLS the tiers talk mutual TLS (pki.go makes a CA, a serving
// certificate for "localhost" — the authority gRPC uses for unix:// targets,
// so the agent verifies it without a server-name override — and one client
// certificate per node, subject system:node:<node>).
//
// Files: cluster.go (Start, objects, Close), controlplane.go (replicas:
// start, kill -9, restart, /metrics), agents.go (agents: kill -9, restart
// with the same state directory), admin.go (ListNodes, settled), pki.go.
// The binaries come from launch.BuildSwitchyard (Config.Binaries, or built
// into the cluster's directory); every process's output goes to a file
// there (cp-<i>.log, agent-<node>.log, appended over restarts). The
// harness is used by the tests here and by e2e/cmd/demo. Start needs root
// and the test-bed binaries; Close stops agents by PID before the
// namespaces are deleted, then the control planes and the API server.
//
// Tests: scenarios_test.go, udp_test.go, scale_test.go, tls_test.go and
// strangers_test.go (130 streams for names that are not Nodes: 100 held,
// 30 refused, the agents undisturbed) run
// in one shared cluster (TestScenarios), each scenario with a Service and
// namespace of its own; TestScenariosNFTables runs the data-path rows in
// the nftables mode, and TestScenariosIPVS (scenarios_ipvs_test.go) every
// row in the ipvs mode, rows that read or break rules doing it the mode's
// way and rows that cannot apply skipping with the reason; it needs a
// kernel with IPVS and skips without one: `make ipvs-scenarios` runs it
// inside the QEMU guest of e2e/dataplane/ipvs, where this package's test
// binary finds etcd and kube-apiserver through SWITCHYARD_TESTBED_BIN and
// Switchyard's commands through SWITCHYARD_PREBUILT_BIN (no Go toolchain
// there); reliability_test.go starts its own clusters because
// it kills processes (TestRestarts, TestControlPlaneFailover), and so do
// restore_test.go (TestRestoreNeverRegresses: node-0's agent restarted
// with an empty state file, another node's, and after a kill between its
// kernel commit and its save — gdb's breakpoint on the save, 500 new
// Services — each under a stream, iptables counters compared),
// modes_test.go (TestModeChange: node-0 restarted in the other mode, both
// directions, then every agent switched by NodeConfig, each under a stream
// of connections, reading every iptables back end and nft back) and
// cleanup_test.go (TestCleanupFlag: `switchyard-agent --cleanup` run in each
// node's namespace after the agents stopped, RunAgentCleanup) and
// apioutage_test.go (TestAPIServerOutage: kube-apiserver killed for 60 s
// under load, Server.KillAPIServer and RestartAPIServer), rollout_test.go
// (TestRollout: a mode change rolled out canary, 50 %, all under a stream
// of connections, then a rollout halted by a failing datapath probe) and
// readme_test.go (TestREADMEExamples: the README's examples that need
// agents — drift, /healthz, switchyardctl rollout — run as printed after
// the break each describes), programming_latency_test.go
// (TestProgrammingLatency, each mode: what kubeproxy_network_programming_duration_seconds,
// the control plane's histogram and ListNodes observe for a slice change,
// a Service-only edit, a slice deletion, a 2099 and a garbage trigger, an
// agent restart; then a Node object deleted under its connected agent,
// warned about once, counted and shown, and re-created), takeover_test.go
// (TestKubeProxyTakeover: upstream kube-proxy in node-0's namespace,
// stopped before the agent starts or still running when it does, each
// mode pair iptables/nftables, under new, long-lived and UDP traffic;
// kube-proxy's rules kept while it runs, gone after, the node as a clean
// install of the agent's mode), ipvs_handover_test.go (TestIPVSHandOver,
// IPVS only, `make ipvs-handover`: ipvs → nftables / iptables and back by
// settings edits, then kube-proxy's ipvs mode → the agent's nftables
// mode, each under the takeover's traffic to the node port on every
// node's address; no new connection may meet IPVS once the new mode is
// acked, the old IPVS drains and then nothing of it may stay). The soak
// (TestSoak, `make soak`; skipped unless SWITCHYARD_SOAK is set) runs
// those kills at random for minutes in one cluster of three nodes and two
// replicas, under 100 connections/s and serial API changes, and writes
// soak.json and soak.md; TestSoakSmoke, in the normal suite, is one fault
// of each kind in 18 s. Files: soak_test.go (config, shared state, fleet
// status), soak_faults_test.go (fault loops, recovery, final checks),
// soak_changes_test.go (changes, convergence by ACK and by traffic),
// soak_traffic_test.go, soak_report_test.go and soak_markdown_test.go
// (failure windows and what preceded them, percentiles; checked without
// root by soak_report_unit_test.go). Every scenario's measured change
// logs one line per node:
//
//	latency scenario=<name> node=<node> to_traffic=<d> to_ack=<d> reported=<d>
//
// (from just before the API write until traffic shows it from or at that
// node, until the control plane saw the node's ACK, and the agent's own
// trigger-time-to-kernel latency), and every scenario checks that
// ListNodes shows each node's acked version equal to its desired one.
package system
