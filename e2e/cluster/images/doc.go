// Package images builds the container images of the real-cluster test bed
// without Docker, a daemon or a registry: each image is assembled with
// go-containerregistry from layers this package writes itself, and saved as
// one OCI archive (a tar of an OCI image layout) that
// `ctr -n k8s.io images import` loads under its full reference.
//
// Images (short name → reference):
//
//	controlplane  ghcr.io/switchyard-proxy/switchyard-controlplane:<tag>  static binary, /etc/passwd, /tmp; user 65532
//	agent         ghcr.io/switchyard-proxy/switchyard-agent:<tag>         Debian bookworm (iptables, ipset, ipvsadm, conntrack, nft, ip) + binary; root
//	pause         registry.k8s.io/pause:3.10.2                            pause.c of k8s.io/kubernetes, gcc -static; user 65535
//	coredns       registry.k8s.io/coredns/coredns:<COREDNS_VERSION>       test-bed coredns + host CA bundle
//	agnhost       registry.k8s.io/e2e-test-images/agnhost:2.66.1          Debian bookworm with the specs' tools + test-bed agnhost, coredns
//	busybox       registry.k8s.io/e2e-test-images/busybox:1.37.0-2        Debian's static busybox + one symlink per applet
//	kube-proxy    registry.k8s.io/kube-proxy:<K8S_VERSION>                the agent's rootfs + test-bed kube-proxy; opt-in (Only)
//	glibc-dns-testing      …/e2e-test-images/glibc-dns-testing:2.1.1      agnhost's rootfs (dig, sh) + test-bed coredns; opt-in
//	regression-issue-74839 …/e2e-test-images/regression-issue-74839:1.5   agnhost's rootfs + test-bed boom server; opt-in
//	nginx                  …/e2e-test-images/nginx:1.27.0-2               Debian bookworm nginx-light, daemon off; opt-in
//
// Invariants:
//   - Reproducible: the same inputs give the same bytes and so the same
//     manifest digest. Every tarball this package writes has its members
//     sorted by path, mtime 0, numeric owners (0:0 unless stated), no user
//     or group names; gzip headers carry no name or time; the image config
//     has Created zero, linux/amd64, and no history times.
//   - Content-addressed cache under CacheDir (default
//     $SWITCHYARD_CACHE_DIR/images): archives/<image>-<key>.tar, where the
//     key hashes the reference, the config and every layer's content; a
//     Debian rootfs in rootfs/, keyed by suite, variant and package list,
//     built by mmdebstrap once (about a minute, network-bound), all
//     concurrently. Everything is written to a temporary file and renamed,
//     so a file in the cache is complete or absent.
//   - Archive.Path points into the cache: callers copy or hard-link it,
//     never modify it. Archives superseded and unused for a day are pruned.
//   - The test-bed binaries (agnhost, coredns, kube-proxy) come from
//     Options.BinDir; a missing one is a *NotBuiltError (IsNotBuilt) before
//     anything runs.
//   - An empty Options.Only builds Defaults: every image but kube-proxy
//     and the full suite's three (Conformance), which are built only when
//     named, so nothing that builds the default set needs kube-proxy or
//     regression-issue-74839 built.
//   - Nothing here needs root except mmdebstrap (its unshare mode needs root
//     or subuid/subgid), which only the images on a Debian rootfs use.
package images
