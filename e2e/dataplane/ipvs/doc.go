// Package ipvs runs the IPVS mode's real-kernel tests. This machine's kernel
// has no IPVS and no dummy links, so the tests run inside a QEMU guest that
// boots Debian's cloud kernel (hack/qemu-kernel.sh):
//
//	go test ./e2e/dataplane/ipvs
//	  ├─ CGO_ENABLED=0 go test -c ./e2e/dataplane/ipvs/guest   (static binary)
//	  └─ hack/qemu-kernel.sh run guest.test -test.v            (TCG, -nic none)
//	       guest /init: modules, SWITCHYARD_QEMU_GUEST=1, guest.test, verdict
//	  ← serial console: go test -v output + "SWITCHYARD-GUEST-EXIT <rc>"
//
// TestIPVSInGuest reports every top-level guest test as one of its
// subtests, with the guest's output, so a run shows what executed in the
// kernel. BenchmarkIPVSInGuest runs the guest's benchmarks and reports
// their numbers.
//
// TestSystemScenariosInGuest (opt-in: SWITCHYARD_GUEST_SCENARIOS=1, make
// ipvs-scenarios) boots the same guest with e2e/system's test binary
// instead, plus etcd, kube-apiserver and Switchyard's two commands added
// to its root (SWITCHYARD_QEMU_ADD, 4 GiB of guest memory), and runs
// TestScenariosIPVS there: the scenario table of TestScenarios with the
// ipvs mode, API server, control plane, agents, namespaces and traffic all
// in the guest. Each row is reported as a subtest: PASS, skip (a row that
// does not apply to the mode, with the reason the guest gave) or FAIL.
//
// TestIPVSHandOverInGuest (opt-in: SWITCHYARD_GUEST_HANDOVER=1, make
// ipvs-handover) boots it the same way, with upstream kube-proxy added,
// and runs e2e/system's TestIPVSHandOver: the nodes leave Switchyard's
// ipvs mode for nftables and iptables and come back, and kube-proxy's
// ipvs mode is replaced by Switchyard's nftables mode, each under
// traffic, with IPVS's connections drained before anything of IPVS is
// removed. Each transition is a subtest; the results table the guest
// logged is logged again.
//
// TestClusterBedInGuest (opt-in: SWITCHYARD_GUEST_CLUSTER=1, make
// ipvs-cluster) boots it with e2e/cluster's test binary, the test bed's
// control-plane binaries and kubelet, the image archives, deploy/ and
// this machine's containerd, runc and CNI plugins, and runs
// TestBedInGuest there: the real-cluster bed, one node by default, with
// Switchyard installed from deploy/ in the ipvs mode. The guest logs each
// phase it reaches with its uptime, and the phases are logged here as a
// table whatever the outcome.
//
// Without qemu-system-x86_64, or without a cached kernel and the root and
// apt-get needed to fetch one, the tests skip with the command that fixes
// it; with CI set they fail instead. The kernel, busybox and the base
// initramfs are cached in ~/.cache/switchyard/qemu (SWITCHYARD_QEMU_CACHE).
//
// Environment: SWITCHYARD_GUEST_RUN (a -test.run pattern for the guest),
// SWITCHYARD_GUEST_SCENARIOS=1 and SWITCHYARD_GUEST_ROWS (a -test.run
// pattern for the scenario rows), SWITCHYARD_GUEST_HANDOVER=1 and
// SWITCHYARD_GUEST_TRANSITIONS (a -test.run pattern for its transitions),
// SWITCHYARD_GUEST_CLUSTER=1 and SWITCHYARD_GUEST_CLUSTER_NODES (kubelet
// nodes in the guest, default 1),
// SWITCHYARD_QEMU_SKIP=1 (skip locally; ignored when CI is set), and the
// SWITCHYARD_QEMU_* settings of hack/qemu-kernel.sh.
package ipvs
