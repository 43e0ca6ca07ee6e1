// Package apiserver runs a real etcd and kube-apiserver on 127.0.0.1 for
// integration tests and benchmarks, without containers, root or a network
// namespace.
//
// The binaries are built once by hack/testbed-build.sh into a cache directory
// keyed by the versions pinned in hack/versions.env; [BinDir] finds that
// directory exactly as the script does, [Available] says whether the binaries
// are there, and [Require] skips a test when they are not (and fails it when
// the CI environment variable is set, so CI never silently skips).
//
// [Start] gives a test a ready server and tears it down through t.Cleanup;
// [StartContext] and [Server.Stop] do the same for code that has no
// testing.TB, such as the benchmark harness.
//
// Invariants:
//   - Every process is started in its own process group with Pdeathsig set
//     to SIGKILL, so neither etcd nor kube-apiserver can outlive the process
//     that started it, even when a test binary panics or times out.
//   - Stop signals the process group with SIGTERM, escalates to SIGKILL after
//     a grace period, reaps both processes and removes the temporary
//     directory. It is idempotent.
//   - Nothing listens on anything but 127.0.0.1; ports are allocated by the
//     kernel and a start that loses a port race is retried with fresh ports.
//   - The server has no kube-controller-manager: nothing creates
//     EndpointSlices, ServiceAccounts or garbage-collects owned objects
//     (package slices writes EndpointSlices for tests).
package apiserver
