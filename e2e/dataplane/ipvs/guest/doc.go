// Package guest holds the IPVS kernel tests that run inside the QEMU guest
// booted by hack/qemu-kernel.sh (Debian's kernel: IPVS, dummy links,
// iptables-legacy, ipset). The parent package e2e/dataplane/ipvs builds
// this package's tests into a static binary (CGO_ENABLED=0 go test -c) and
// boots the guest; it reports every guest test as its own subtest.
//
// The tests run only where SWITCHYARD_QEMU_GUEST=1, which the guest's /init
// sets: on any other machine TestMain exits at once without running a test,
// so `go test ./...` on a host never touches its kernel. Inside the guest
// every test builds its own e2e/testbed/netns topology (node, pods, client
// as network namespaces) and drives real TCP/UDP traffic through it.
package guest
