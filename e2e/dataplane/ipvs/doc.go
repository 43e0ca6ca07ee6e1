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
// Without qemu-system-x86_64, or without a cached kernel and the root and
// apt-get needed to fetch one, the tests skip with the command that fixes
// it; with CI set they fail instead. The kernel, busybox and the base
// initramfs are cached in ~/.cache/switchyard/qemu (SWITCHYARD_QEMU_CACHE).
//
// Environment: SWITCHYARD_GUEST_RUN (a -test.run pattern for the guest),
// SWITCHYARD_QEMU_SKIP=1 (skip locally; ignored when CI is set), and the
// SWITCHYARD_QEMU_* settings of hack/qemu-kernel.sh.
package ipvs
