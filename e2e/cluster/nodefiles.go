package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
)

// The values kubelet wants for the machine-wide sysctls it would write
// (pkg/kubelet/cm's setupKernelTunables). Each node binds files holding
// them over /proc/sys inside its own mount namespace, so kubelet reads
// what it wants, writes nothing, and the machine keeps its values.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// writeFiles writes the node's containerd, CNI and kubelet configuration.
func (n *node) writeFiles() error {
	for _, d := range []string{"run", "var/lib", "var/log", "var/tmp", "var/cache", "sysctl", "cni/net.d", "etc"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	// /var/run and /var/lock are symlinks into /run on Debian; the node's
	// /var replaces the machine's, so it needs them too.
	for link, target := range map[string]string{"var/run": "/run", "var/lock": "/run/lock"} {
		if err := os.Symlink(target, filepath.Join(n.dir, link)); err != nil && !os.IsExist(err) {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	for key, val := range kubeletSysctls {
		if err := os.WriteFile(filepath.Join(n.dir, "sysctl", strings.ReplaceAll(key, "/", ".")), []byte(val+"\n"), 0o644); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	files := map[string]string{
		"containerd.toml":           n.containerdConfig(),
		"cni/net.d/10-bed.conflist": n.cniConfig(),
		"kubelet.yaml":              n.kubeletConfig(),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return writeKubeconfig(filepath.Join(n.dir, "bootstrap.kubeconfig"), n.c.server(), n.c.cp.ca.CertFile,
		credential{token: n.c.cp.bootstrapToken})
}

// kubeletRoot is the kubelet's --root-dir, on the node's own /var.
const kubeletRoot = "/var/lib/kubelet"

// mountScript runs inside the node's fresh mount and UTS namespaces: the
// hostname hostNetwork pods see, and per-node views of every fixed path
// kubelet, containerd, CNI and the agent's hostPath volumes use.
func (n *node) mountScript() string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -eu\nhostname %s\n", n.name)
	fmt.Fprintf(&b, "mount --bind %s /run\nmkdir -p /run/netns /run/lock /run/containerd\n", filepath.Join(n.dir, "run"))
	fmt.Fprintf(&b, "mount --bind %s /var\n", filepath.Join(n.dir, "var"))
	// The kubelet bind-mounts its root dir onto itself to make it rshared
	// when it is not (the holder's namespace is private) while, in another
	// goroutine, it creates the pod-resources socket as a temp file renamed
	// into place: a rename whose two lookups straddle that new mount fails
	// with EXDEV and the kubelet exits (seen once in CI). Done here, before
	// it starts, the kubelet finds the mount shared and leaves it.
	fmt.Fprintf(&b, "mkdir -p %[1]s\nmount --bind %[1]s %[1]s\nmount --make-rshared %[1]s\n", kubeletRoot)
	for key := range kubeletSysctls {
		fmt.Fprintf(&b, "mount --bind %s /proc/sys/%s\n", filepath.Join(n.dir, "sysctl", strings.ReplaceAll(key, "/", ".")), key)
	}
	return b.String()
}

func (n *node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # No CAP_SYS_RESOURCE here: a negative oom_score_adj fails every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_cdi = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        NoPivotRoot = %t
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, images.PauseRef, n.c.cfg.NoPivotRoot, filepath.Join(n.dir, "cni", "net.d"))
}

func (n *node) cniConfig() string {
	// One host-local range set per family: on a dual-stack bed every pod
	// gets an address of each, and a default route of each via cbr0.
	ranges := fmt.Sprintf(`[{"subnet": %q, "gateway": %q}]`, n.podCIDR, n.gateway)
	routes := `{"dst": "0.0.0.0/0"}`
	if n.podCIDR6.IsValid() {
		ranges += fmt.Sprintf(`, [{"subnet": %q, "gateway": %q}]`, n.podCIDR6, n.gateway6)
		routes += `, {"dst": "::/0"}`
	}
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "bed",
  "plugins": [
    {"type": "bridge", "bridge": "cbr0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [%s],
              "routes": [%s], "dataDir": "/var/lib/cni/networks"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, ranges, routes)
}

func (n *node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: %s
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
clusterDNS: [%s]
clusterDomain: %s
failSwapOn: false
protectKernelDefaults: false
oomScoreAdj: 0
rotateCertificates: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
`, n.cgroup, n.ip, DNSVIP, clusterDomain, n.c.cp.ca.CertFile)
}
