package system

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Package paths of the binaries the cluster builds and runs.
const (
	controlPlanePkg = "github.com/switchyard-proxy/switchyard/controlplane/cmd/switchyard-controlplane"
	agentPkg        = "github.com/switchyard-proxy/switchyard/nodeagent/cmd/switchyard-agent"
)

// Defaults of the sample workload.
const (
	Namespace   = "demo"
	ServiceName = "echo"
	ClusterIP   = "10.96.0.10"
	ServicePort = 80
	TargetPort  = 8080
	sliceSuffix = "a"
	clusterCIDR = "10.244.0.0/16"
)

// Config describes a cluster. The zero value gives two nodes and three pods.
type Config struct {
	Nodes, Pods int
	// Logger receives progress and child-process output (default: discard).
	Logger *slog.Logger
	// EchoBinary is a built echo server; empty re-execs the running binary,
	// whose main or TestMain must call echo.RunChild first.
	EchoBinary string
}

// Cluster is a running API server, control plane, agents and pods.
type Cluster struct {
	API    *apiserver.Server
	Topo   *netns.Topology
	Slices *eps.Client
	// Socket is the control plane's unix socket; Target its gRPC target.
	Socket, Target string

	log     *slog.Logger
	dir     string
	cp      *exec.Cmd
	cpDone  chan struct{}
	cpLogs  *lockedBuffer
	agents  []*netns.Process
	conn    *grpc.ClientConn
	cancel  context.CancelFunc
	closeMu sync.Once
	nodeIDs []string
}

// Start builds the binaries and starts everything. ctx bounds only the
// start-up; Close tears everything down. On error what was started is gone.
func Start(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	if cfg.Pods == 0 {
		cfg.Pods = 3
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	life, cancel := context.WithCancel(context.Background())
	c := &Cluster{log: cfg.Logger, cancel: cancel, cpLogs: &lockedBuffer{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if c.dir, err = os.MkdirTemp("", "switchyard-system-"); err != nil {
		return nil, err
	}
	c.Socket = filepath.Join(c.dir, "cp.sock")
	c.Target = "unix://" + c.Socket
	cpBin, agentBin, err := c.build(ctx)
	if err != nil {
		return nil, err
	}
	c.log.Info("starting etcd and kube-apiserver")
	if c.API, err = apiserver.StartContext(ctx, apiserver.Config{Logger: c.log}); err != nil {
		return nil, fmt.Errorf("start API server: %w", err)
	}
	c.Slices = eps.New(c.API.Client())
	c.log.Info("creating namespaces", "nodes", cfg.Nodes, "pods", cfg.Pods)
	if c.Topo, err = netns.Create(ctx, netns.Spec{Nodes: cfg.Nodes, Pods: cfg.Pods}, netns.Options{Logger: c.log}); err != nil {
		return nil, fmt.Errorf("create topology: %w", err)
	}
	if _, err = echo.StartPods(life, echo.Launcher{Topo: c.Topo, Binary: cfg.EchoBinary}, c.Topo.Pods(),
		echo.Config{TCP: ":" + strconv.Itoa(TargetPort), ReportClient: true}); err != nil {
		return nil, fmt.Errorf("start echo pods: %w", err)
	}
	if err = c.createObjects(ctx); err != nil {
		return nil, err
	}
	if err = c.startControlPlane(ctx, cpBin); err != nil {
		return nil, err
	}
	if c.conn, err = grpc.NewClient(c.Target, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	for _, n := range c.Topo.Nodes() {
		if err = c.startAgent(life, agentBin, n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// build compiles both commands of the workspace into the cluster's dir.
func (c *Cluster) build(ctx context.Context) (cp, agent string, err error) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return "", "", err
	}
	out := make([]string, 2)
	for i, pkg := range []string{controlPlanePkg, agentPkg} {
		out[i] = filepath.Join(c.dir, filepath.Base(pkg))
		c.log.Info("building", "package", pkg)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out[i], pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return out[0], out[1], nil
}

// createObjects creates the namespace, the nodes, the Service and its
// EndpointSlice with every pod.
func (c *Cluster) createObjects(ctx context.Context) error {
	cs := c.API.Client()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	for _, n := range c.Topo.Nodes() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{corev1.LabelTopologyZone: zone(n)}}}
		created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.IP.String()}}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("set addresses of node %s: %w", n.Name, err)
		}
		c.nodeIDs = append(c.nodeIDs, n.Name)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ServiceName},
		Spec: corev1.ServiceSpec{ClusterIP: ClusterIP, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: ServicePort,
		}}},
	}
	if _, err := cs.CoreV1().Services(Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service: %w", err)
	}
	if _, err := c.Slices.Create(ctx, c.slice(c.Topo.Pods())); err != nil {
		return fmt.Errorf("create endpoint slice: %w", err)
	}
	return nil
}

func zone(n netns.Node) string { return "zone-" + strconv.Itoa(n.Index%2) }

// slice is the Service's EndpointSlice with the given pods as ready endpoints.
func (c *Cluster) slice(pods []netns.Pod) eps.Slice {
	s := eps.Slice{Namespace: Namespace, Service: ServiceName, Suffix: sliceSuffix, Ports: []eps.Port{eps.TCP("http", TargetPort)}}
	for _, p := range pods {
		node := c.Topo.Node(p.Node)
		s.Endpoints = append(s.Endpoints, eps.Ready(p.IP.String()).OnNode(node.Name).InZone(zone(node)))
	}
	return s
}

// ScaleTo rewrites the EndpointSlice so that only pods serve.
func (c *Cluster) ScaleTo(ctx context.Context, pods []netns.Pod) error {
	if _, err := c.Slices.Update(ctx, c.slice(pods)); err != nil {
		return fmt.Errorf("scale endpoint slice: %w", err)
	}
	return nil
}

// DeleteService deletes the Service and its EndpointSlice.
func (c *Cluster) DeleteService(ctx context.Context) error {
	if err := c.API.Client().CoreV1().Services(Namespace).Delete(ctx, ServiceName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete service: %w", err)
	}
	if err := c.Slices.Delete(ctx, Namespace, ServiceName, sliceSuffix); err != nil {
		return fmt.Errorf("delete endpoint slice: %w", err)
	}
	return nil
}

// VIP is the Service's address.
func (c *Cluster) VIP() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr(ClusterIP), ServicePort)
}

// freeLoopback returns a loopback address with a port free right now.
func freeLoopback() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startControlPlane runs switchyard-controlplane in this namespace, serving
// gRPC on the unix socket, and waits for /readyz.
func (c *Cluster) startControlPlane(ctx context.Context, bin string) error {
	healthz, err := freeLoopback()
	if err != nil {
		return err
	}
	c.log.Info("starting switchyard-controlplane", "listen", c.Target)
	c.cp = exec.Command(bin, "--kubeconfig", c.API.KubeconfigPath(), "--insecure", "--listen", c.Target,
		"--healthz-bind-address", healthz, "--metrics-bind-address", "", "--coalesce-window", "20ms",
		"--id", "cp-system", "--cluster-cidr", clusterCIDR)
	c.cp.Stdout, c.cp.Stderr = c.cpLogs, c.cpLogs
	c.cp.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.cp.Start(); err != nil {
		return fmt.Errorf("start control plane: %w", err)
	}
	c.cpDone = make(chan struct{})
	go func() { _ = c.cp.Wait(); close(c.cpDone) }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		if resp, err := http.Get("http://" + healthz + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-c.cpDone:
			return fmt.Errorf("control plane exited: %s", c.cpLogs.String())
		case <-deadline.C:
			return fmt.Errorf("control plane not ready after 30s: %s", c.cpLogs.String())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startAgent runs switchyard-agent inside the node's namespace.
func (c *Cluster) startAgent(ctx context.Context, bin string, n netns.Node) error {
	state := filepath.Join(c.dir, "agent-"+n.Name)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	p, err := c.Topo.Start(ctx, n.NS, netns.Cmd{Argv: []string{bin,
		"--mode", "iptables", "--insecure", "--control-plane", c.Target, "--node-name", n.Name,
		"--state-dir", state, "--healthz-bind-address", "127.0.0.1:10256",
		"--metrics-bind-address", "127.0.0.1:10249", "--min-sync-period", "100ms",
	}})
	if err != nil {
		return fmt.Errorf("start agent on %s: %w", n.Name, err)
	}
	c.log.Info("started switchyard-agent", "node", n.Name, "ns", n.NS, "pid", p.Pid)
	c.agents = append(c.agents, p)
	return nil
}

// ListNodes asks the control plane's AdminService.
func (c *Cluster) ListNodes(ctx context.Context) ([]*switchyardv1.NodeStatus, error) {
	resp, err := switchyardv1.NewAdminServiceClient(c.conn).ListNodes(ctx, &switchyardv1.ListNodesRequest{})
	if err != nil {
		return nil, fmt.Errorf("ListNodes: %w", err)
	}
	return resp.GetNodes(), nil
}

// Settled reports whether every node's agent is connected and has acked the
// version the control plane wants it to have.
func (c *Cluster) Settled(ctx context.Context) (bool, error) {
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		return false, err
	}
	acked := map[string]bool{}
	for _, n := range nodes {
		acked[n.GetName()] = n.GetConnected() && n.GetDesiredVersion() != "" && n.GetAckedVersion() == n.GetDesiredVersion()
	}
	for _, name := range c.nodeIDs {
		if !acked[name] {
			return false, nil
		}
	}
	return true, nil
}

// WaitSettled polls Settled until it holds or ctx ends.
func (c *Cluster) WaitSettled(ctx context.Context) error {
	for {
		ok, err := c.Settled(ctx)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agents not settled (last error: %v): %w", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ControlPlaneLogs returns the control plane's output so far.
func (c *Cluster) ControlPlaneLogs() string { return c.cpLogs.String() }

// Close stops agents (by PID) and pods, deletes the namespaces, stops the
// control plane and the API server and removes the temp dir. Idempotent.
func (c *Cluster) Close() error {
	var errs []error
	c.closeMu.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, a := range c.agents {
			if err := a.Stop(ctx); err != nil {
				c.log.Debug("agent stop", "pid", a.Pid, "err", err)
			}
		}
		if c.Topo != nil {
			if err := c.Topo.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("tear down namespaces: %w", err))
			}
		}
		if c.conn != nil {
			c.conn.Close()
		}
		if c.cp != nil && c.cp.Process != nil {
			_ = c.cp.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.cpDone:
			case <-time.After(10 * time.Second):
				_ = syscall.Kill(-c.cp.Process.Pid, syscall.SIGKILL)
				<-c.cpDone
			}
		}
		if c.API != nil {
			if err := c.API.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop API server: %w", err))
			}
		}
		c.cancel()
		if c.dir != "" {
			errs = append(errs, os.RemoveAll(c.dir))
		}
	})
	return errors.Join(errs...)
}

// lockedBuffer is a bytes.Buffer safe for a process's output and readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
