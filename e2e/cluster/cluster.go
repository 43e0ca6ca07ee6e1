package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// Cluster is a running bed. Its methods are safe for concurrent use.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	topo  *netns.Topology
	cp    controlPlane
	nodes []*node
	stats Stats
	// swydTLS: the install serves TLS (every overlay but plaintext);
	// swydCAPEM is the CA its server certificates chain to: the test CA
	// of the mTLS overlay, or the bundle the control plane published.
	swydTLS   bool
	swydCAPEM []byte
	// swydCA is the mTLS overlay's test CA (nil for the other installs).
	swydCA *authority
	// swydNS is the namespace of the Switchyard install (SystemNS unless
	// the kube-system overlay).
	swydNS string

	downOnce sync.Once
	downErr  error
}

// Stats are bring-up measurements.
type Stats struct {
	ControlPlaneReady time.Duration // kube-apiserver /readyz and RBAC
	NodesReady        time.Duration // every Node Ready
	Total             time.Duration
}

// Up builds the network, starts the control plane and every node, and
// waits until every node is Ready. On error everything is torn down.
func Up(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	begin := time.Now()
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "swyd-cluster-"); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			err = fmt.Errorf("cluster up (logs in %s): %w", cfg.Dir, err)
			if derr := c.Down(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, derr)
			}
		}
	}()
	spec := netns.Spec{
		Nodes: cfg.Nodes, NoPodBridge: true, Prefix: "swyd-",
		NetworkCIDR: NetworkCIDR, FirstNodeHost: firstNodeHost, ControlHost: 3, ClientHost: 2,
		ClusterCIDR: ClusterCIDR, NodeCIDRBits: 24, ServiceCIDR: ServiceCIDR,
	}
	if cfg.DualStack {
		spec.DualStack = true
		spec.NetworkCIDR6, spec.ClusterCIDR6, spec.NodeCIDRBits6, spec.ServiceCIDR6 = NetworkCIDR6, ClusterCIDR6, 64, ServiceCIDR6
	}
	c.topo, err = netns.Create(ctx, spec, netns.Options{Logger: c.log})
	if err != nil {
		return c, err
	}
	c.log.Info("cluster network ready", "id", c.topo.ID(), "dir", cfg.Dir)
	if err := c.writeCredentials(); err != nil {
		return c, err
	}
	if err := c.startControlPlane(ctx); err != nil {
		return c, err
	}
	c.stats.ControlPlaneReady = time.Since(begin)
	c.log.Info("control plane ready", "after", c.stats.ControlPlaneReady.Round(time.Millisecond))
	errs := make([]error, cfg.Nodes)
	var wg sync.WaitGroup
	c.nodes = make([]*node, cfg.Nodes)
	for i := range cfg.Nodes {
		c.nodes[i] = c.newNode(i)
	}
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if err := c.waitNodesReady(ctx); err != nil {
		return c, err
	}
	c.stats.NodesReady = time.Since(begin)
	c.stats.Total = time.Since(begin)
	c.log.Info("cluster up", "nodes", cfg.Nodes, "after", c.stats.Total.Round(time.Millisecond))
	return c, nil
}

// Stats returns the bring-up measurements.
func (c *Cluster) Stats() Stats { return c.stats }

// Dir is the state directory.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// DualStack reports whether the bed is IPv4/IPv6 (Config.DualStack).
func (c *Cluster) DualStack() bool { return c.cfg.DualStack }

// Topology is the cluster's network.
func (c *Cluster) Topology() *netns.Topology { return c.topo }

// ClientNS is the namespace every client (kubectl, e2e.test, probes) runs in.
func (c *Cluster) ClientNS() string { return c.topo.Client().NS }

// AdminKubeconfig is a kubeconfig for system:masters.
func (c *Cluster) AdminKubeconfig() string { return c.cp.adminKubecfg }

// CAFile is the cluster CA: it signs the API server, kubelet client
// certificates and the kube-root-ca.crt ConfigMap's content.
func (c *Cluster) CAFile() string { return c.cp.ca.CertFile }

// Kubectl runs kubectl with the admin kubeconfig inside the client namespace.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return c.KubectlInput(ctx, "", args...)
}

// KubectlInput is Kubectl with stdin from a file path ("" for none).
func (c *Cluster) KubectlInput(ctx context.Context, stdinFile string, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(c.cfg.BinDir, "kubectl"), "--kubeconfig=" + c.cp.adminKubecfg}, args...)
	if stdinFile != "" {
		argv = append(argv, "-f", stdinFile)
	}
	return launch.Run(ctx, c.topo.Guard(), launch.Spec{Name: "kubectl", Argv: argv,
		NetNS: "/run/netns/" + c.ClientNS()})
}

// Apply writes manifest (YAML) to the state directory as <name>.yaml and
// applies it server-side.
func (c *Cluster) Apply(ctx context.Context, name, manifest string) error {
	path := filepath.Join(c.cfg.Dir, "manifests", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		return fmt.Errorf("apply %s: %w", name, err)
	}
	if _, err := c.KubectlInput(ctx, path, "apply", "--server-side", "--force-conflicts"); err != nil {
		return fmt.Errorf("apply %s: %w", name, err)
	}
	return nil
}

// poll calls check every 250 ms until it returns true, an error, or ctx ends.
func (c *Cluster) poll(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		ok, err := check(attempt)
		cancel()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// waitNodesReady waits until kubectl lists every node as Ready.
func (c *Cluster) waitNodesReady(ctx context.Context) error {
	return c.poll(ctx, "nodes Ready", func(ctx context.Context) (bool, error) {
		if err := c.checkAlive(); err != nil {
			return false, err
		}
		for _, n := range c.nodes {
			if err := n.checkAlive(); err != nil {
				return false, err
			}
		}
		out, err := c.Kubectl(ctx, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return false, nil
		}
		ready := 0
		for line := range strings.Lines(string(out)) {
			if strings.HasSuffix(strings.TrimSpace(line), "=True") {
				ready++
			}
		}
		return ready == len(c.nodes), nil
	})
}

// BinDir is where kubectl and the other test-bed binaries are.
func (c *Cluster) BinDir() string { return c.cfg.BinDir }
