package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// node is one kubelet node: a network namespace from the topology, plus a
// mount and UTS namespace held by a sleeping holder process that every
// component of the node joins.
type node struct {
	c       *Cluster
	index   int
	name    string
	ns      string
	ip      netip.Addr
	podCIDR netip.Prefix
	gateway netip.Addr
	// ip6, podCIDR6 and gateway6 are the IPv6 half on a dual-stack bed
	// (invalid otherwise).
	ip6, gateway6 netip.Addr
	podCIDR6      netip.Prefix
	zone          string
	dir           string
	cgroup        string // kubelet's cgroupRoot, in every v1 hierarchy

	holder, containerd, kubelet *launch.Process
}

func (c *Cluster) newNode(i int) *node {
	tn := c.topo.Node(i)
	return &node{
		c: c, index: i, name: NodeName(i), ns: tn.NS, ip: tn.IP, podCIDR: tn.PodCIDR, gateway: tn.PodGateway,
		ip6: tn.IP6, podCIDR6: tn.PodCIDR6, gateway6: tn.PodGateway6,
		zone: c.cfg.Zones[i%len(c.cfg.Zones)], dir: filepath.Join(c.cfg.Dir, NodeName(i)),
		cgroup: "/swyd-" + c.topo.ID() + "-" + NodeName(i),
	}
}

func (n *node) logPath(what string) string {
	return filepath.Join(n.c.cfg.Dir, "logs", n.name+"-"+what+".log")
}

// start brings the node up to a running kubelet.
func (n *node) start(ctx context.Context) error {
	begin := time.Now()
	if err := n.writeFiles(); err != nil {
		return err
	}
	if err := makeCgroups(n.cgroup); err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	guard := n.c.topo.Guard()
	var err error
	n.holder, err = launch.Start(guard, launch.Spec{Name: n.name + " holder", NetNS: "/run/netns/" + n.ns,
		Argv:    []string{"unshare", "--mount", "--uts", "--propagation", "private", "--", "sleep", "infinity"},
		LogPath: n.logPath("holder")})
	if err != nil {
		return err
	}
	if err := n.waitHolder(ctx); err != nil {
		return err
	}
	if _, err := n.run(ctx, "mounts", "sh", "-c", n.mountScript()); err != nil {
		return err
	}
	if n.containerd, err = n.startProc("containerd", "containerd", "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	if err := n.c.poll(ctx, n.name+" containerd", func(ctx context.Context) (bool, error) {
		if done, err := n.containerd.Exited(); done {
			return false, fmt.Errorf("%w\n%s", err, n.containerd.Tail(20))
		}
		_, err := n.run(ctx, "ctr version", "ctr", "version")
		return err == nil, nil
	}); err != nil {
		return err
	}
	if err := n.importImages(ctx); err != nil {
		return err
	}
	n.kubelet, err = n.startProc("kubelet", filepath.Join(n.c.cfg.BinDir, "kubelet"),
		"--config="+filepath.Join(n.dir, "kubelet.yaml"),
		"--bootstrap-kubeconfig="+filepath.Join(n.dir, "bootstrap.kubeconfig"),
		"--kubeconfig="+kubeletRoot+"/kubeconfig",
		"--root-dir="+kubeletRoot, "--cert-dir="+kubeletRoot+"/pki",
		"--hostname-override="+n.name, "--node-ip="+n.nodeIPs(),
		"--node-labels=topology.kubernetes.io/zone="+n.zone,
		"--v=1")
	if err != nil {
		return err
	}
	n.c.log.Info("node started", "node", n.name, "ip", n.ip, "zone", n.zone, "after", time.Since(begin).Round(time.Millisecond))
	return nil
}

// nodeIPs is kubelet's --node-ip: IPv4 first, so the Node's first
// InternalIP (the one kube-apiserver dials) stays the IPv4 one.
func (n *node) nodeIPs() string {
	if n.ip6.IsValid() {
		return n.ip.String() + "," + n.ip6.String()
	}
	return n.ip.String()
}

// waitHolder waits until the holder has exec'd sleep, i.e. its mount and
// UTS namespaces exist.
func (n *node) waitHolder(ctx context.Context) error {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	return n.c.poll(ctx, n.name+" holder", func(context.Context) (bool, error) {
		if done, err := n.holder.Exited(); done {
			return false, fmt.Errorf("%w\n%s", err, n.holder.Tail(10))
		}
		mnt, err := os.Readlink("/proc/" + strconv.Itoa(n.holder.Pid()) + "/ns/mnt")
		return err == nil && mnt != self, nil
	})
}

// run runs a short command inside the node (network, mount, UTS).
func (n *node) run(ctx context.Context, what string, argv ...string) ([]byte, error) {
	return launch.Run(ctx, n.c.topo.Guard(), launch.Spec{Name: n.name + " " + what, Argv: argv,
		Target: n.holder.Pid(), LogPath: n.logPath("commands")})
}

func (n *node) startProc(what string, argv ...string) (*launch.Process, error) {
	p, err := launch.Start(n.c.topo.Guard(), launch.Spec{Name: n.name + " " + what, Argv: argv,
		Target: n.holder.Pid(), LogPath: n.logPath(what)})
	if err == nil {
		n.c.log.Info("started", "node", n.name, "component", what, "pid", p.Pid())
	}
	return p, err
}

// importImages imports every archive into containerd's k8s.io namespace,
// then adds the aliases.
func (n *node) importImages(ctx context.Context) error {
	begin := time.Now()
	for _, a := range n.c.cfg.Images {
		if _, err := n.run(ctx, "import", "ctr", "-n", "k8s.io", "images", "import", "--no-unpack=false", a); err != nil {
			return err
		}
	}
	for ref, aliases := range n.c.cfg.Aliases {
		for _, alias := range aliases {
			if _, err := n.run(ctx, "tag", "ctr", "-n", "k8s.io", "images", "tag", "--force", ref, alias); err != nil {
				return err
			}
		}
	}
	n.c.log.Info("images imported", "node", n.name, "archives", len(n.c.cfg.Images), "after", time.Since(begin).Round(time.Millisecond))
	return nil
}

// checkAlive fails when containerd or kubelet has exited.
func (n *node) checkAlive() error {
	for _, p := range []*launch.Process{n.holder, n.containerd, n.kubelet} {
		if p == nil {
			continue
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("%w\n--- %s ---\n%s", err, p.LogPath, p.Tail(30))
		}
	}
	return nil
}

// Exec runs argv in node i's network namespace only (as a hostNetwork pod
// would see the network), e.g. curl from the node.
func (c *Cluster) NodeExec(ctx context.Context, i int, argv ...string) ([]byte, error) {
	return launch.Run(ctx, c.topo.Guard(), launch.Spec{Name: NodeName(i) + " exec", Argv: argv,
		NetNS: "/run/netns/" + c.nodes[i].ns})
}

// NodeNS is node i's network namespace name in the topology.
func (c *Cluster) NodeNS(i int) string { return c.nodes[i].ns }

// Nodes is the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// stop tears the node down: kubelet first (so nothing restarts), then every
// process in its cgroups and in its mount namespace (containers, shims,
// containerd), then the holder; the cgroups last.
func (n *node) stop() error {
	var errs []error
	if n.kubelet != nil {
		errs = append(errs, n.kubelet.Stop(2*time.Second))
	}
	errs = append(errs, killCgroupTree(n.cgroup))
	if n.holder != nil {
		errs = append(errs, killMountNS(n.holder.Pid()))
	}
	for _, p := range []*launch.Process{n.containerd, n.holder} {
		if p != nil {
			errs = append(errs, p.Kill())
		}
	}
	errs = append(errs, removeCgroups(n.cgroup))
	return errors.Join(errs...)
}

// killMountNS SIGKILLs every process sharing pid's mount namespace
// (containerd's shims are not in the node's cgroups), except pid itself.
func killMountNS(pid int) error {
	for range 20 {
		victims := 0
		for _, p := range mountNSPids(pid) {
			if p != pid && p != os.Getpid() {
				victims++
				_ = syscallKill(p)
			}
		}
		if victims == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("processes in the mount namespace of pid %d survive SIGKILL", pid)
}

func pidOf(p *launch.Process) int {
	if p == nil {
		return 0
	}
	return p.Pid()
}

// NodePath is where path of node i's /var or /run (its own, in its mount
// namespace) lives on this machine's file system.
func (c *Cluster) NodePath(i int, path string) (string, error) {
	for _, top := range []string{"/var/", "/run/"} {
		if strings.HasPrefix(path, top) {
			return filepath.Join(c.nodes[i].dir, path), nil
		}
	}
	return "", fmt.Errorf("node path %s: only /var and /run are the node's own", path)
}
