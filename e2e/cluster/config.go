package cluster

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Addresses of the bed, fixed so that the test overlay in
// e2e/cluster/overlays can name the nodes: node i is 10.201.0.(10+i).
var (
	NetworkCIDR = netip.MustParsePrefix("10.201.0.0/24")
	ClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	ServiceCIDR = netip.MustParsePrefix("10.96.0.0/16")
	// APIServerIP is the control namespace's address.
	APIServerIP = netip.MustParseAddr("10.201.0.3")
	// KubernetesVIP and DNSVIP are the first and tenth service addresses.
	KubernetesVIP = netip.MustParseAddr("10.96.0.1")
	DNSVIP        = netip.MustParseAddr("10.96.0.10")

	// The IPv6 half of a Config.DualStack bed: unique local addresses
	// shaped like the IPv4 plan (node i is fd00:201::(10+i), hexadecimal),
	// which never leave the machine. The service range is a /112 because
	// kube-apiserver refuses an IPv6 range wider than /108 and a /112 is
	// what the netns topology plans by default.
	NetworkCIDR6 = netip.MustParsePrefix("fd00:201::/64")
	ClusterCIDR6 = netip.MustParsePrefix("fd00:244::/56")
	ServiceCIDR6 = netip.MustParsePrefix("fd00:96::/112")
)

const (
	firstNodeHost = 10
	apiServerPort = 6443
	clusterDomain = "cluster.local"
	// MaxNodes is what the address plan and the overlays allow.
	MaxNodes = 6
)

// Config describes a cluster. The zero value is two nodes in two zones.
type Config struct {
	// Nodes is the number of kubelet nodes (default 2, at most MaxNodes).
	Nodes int
	// Zones are the nodes' topology.kubernetes.io/zone labels, assigned
	// round-robin (default zone-a, zone-b, zone-c).
	Zones []string
	// Dir holds every node's and component's state and logs (default: a
	// new directory under $TMPDIR). Removed by Down unless KeepDir.
	Dir     string
	KeepDir bool
	// BinDir has the test bed's binaries (default: hack/testbed-build.sh's).
	BinDir string
	// Images are OCI archives imported into every node's containerd.
	Images []string
	// Aliases imports an image under more names: ref → extra refs (the
	// rolling-update test changes the agent's tag).
	Aliases map[string][]string
	// Logger receives progress (default: discard).
	Logger *slog.Logger
	// DualStack makes the bed IPv4/IPv6: every namespace and pod gets an
	// IPv6 address too (NetworkCIDR6, ClusterCIDR6), kube-apiserver serves
	// both service ranges (IPv4 primary, so existing single-stack Services
	// stay IPv4), kubelets report both node addresses, and Switchyard is
	// told both pod CIDRs. Without it the bed is IPv4 only, as CI runs it.
	DualStack bool
	// KubeletCertTTL, when set, is kube-controller-manager's
	// --cluster-signing-duration: the lifetime of every certificate it
	// signs, the kubelets' client certificates included, so that they
	// rotate during a test (the kubelet renews at 70–90 % of the lifetime,
	// counted from a NotBefore the signer backdates by 5 minutes). At least
	// MinKubeletCertTTL; zero keeps the controller's default of a year.
	KubeletCertTTL time.Duration
	// NoPivotRoot makes runc enter a container's root with chroot
	// instead of pivot_root, which fails (EINVAL) when the machine's own
	// root is an initramfs, as in the QEMU guest. Less isolation
	// (a process could chroot back out), so only for such a root.
	NoPivotRoot bool
}

// MinKubeletCertTTL is the shortest Config.KubeletCertTTL: with the
// signer's 5 minutes of backdating, a shorter lifetime can put the
// kubelet's renewal deadline before the certificate was even issued, and
// every node would renew without pause.
const MinKubeletCertTTL = 3 * time.Minute

func (c Config) withDefaults() (Config, error) {
	if c.Nodes == 0 {
		c.Nodes = 2
	}
	if c.Nodes < 1 || c.Nodes > MaxNodes {
		return c, fmt.Errorf("cluster: %d nodes: want 1..%d", c.Nodes, MaxNodes)
	}
	if c.KubeletCertTTL != 0 && c.KubeletCertTTL < MinKubeletCertTTL {
		return c, fmt.Errorf("cluster: KubeletCertTTL %v: want 0 or at least %v", c.KubeletCertTTL, MinKubeletCertTTL)
	}
	if len(c.Zones) == 0 {
		c.Zones = []string{"zone-a", "zone-b", "zone-c"}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BinDir == "" {
		dir, err := apiserver.BinDir()
		if err != nil {
			return c, err
		}
		c.BinDir = dir
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"} {
		if _, err := os.Stat(filepath.Join(c.BinDir, b)); err != nil {
			return c, fmt.Errorf("cluster: %s not built in %s: run hack/testbed-build.sh (or make deps): %w", b, c.BinDir, err)
		}
	}
	for _, t := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "nsenter", "unshare"} {
		if _, err := exec.LookPath(t); err != nil {
			return c, fmt.Errorf("cluster: %s missing (Debian: containerd runc util-linux; make deps installs them): %w", t, err)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		return c, fmt.Errorf("cluster: CNI plugins missing (Debian containernetworking-plugins): %w", err)
	}
	return c, nil
}

// NodeName is the Kubernetes name of node i.
func NodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// NodeIP is node i's address.
func NodeIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 201, 0, byte(firstNodeHost + i)})
}

// NodeIP6 is node i's IPv6 address on a dual-stack bed.
func NodeIP6(i int) netip.Addr {
	a := NetworkCIDR6.Addr().As16()
	a[15] = byte(firstNodeHost + i)
	return netip.AddrFrom16(a)
}

// serviceCIDRs is kube-apiserver's --service-cluster-ip-range: the IPv4
// range first, so that it stays the primary family.
func (c Config) serviceCIDRs() string { return c.joined(ServiceCIDR, ServiceCIDR6) }

// clusterCIDRs is the pod CIDRs of the cluster, IPv4 first.
func (c Config) clusterCIDRs() string { return c.joined(ClusterCIDR, ClusterCIDR6) }

func (c Config) joined(v4, v6 netip.Prefix) string {
	if c.DualStack {
		return v4.String() + "," + v6.String()
	}
	return v4.String()
}

// PinnedVersion reads one KEY=VALUE of hack/versions.env.
func PinnedVersion(key string) (string, error) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return "", err
	}
	vars, err := apiserver.PinnedVars(root)
	if err != nil {
		return "", err
	}
	v, ok := vars[key]
	if !ok {
		return "", fmt.Errorf("versions: no %s in hack/versions.env", key)
	}
	return v, nil
}
