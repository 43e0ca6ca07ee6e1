package system

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	eps "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
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

// Config describes a cluster. The zero value gives two nodes, three pods,
// one control-plane replica and plaintext gRPC.
type Config struct {
	Nodes, Pods int
	// ControlPlanes is the number of control-plane replicas (default 1).
	// Every agent gets all of them, comma-separated, and tries them in order.
	ControlPlanes int
	// TLS serves gRPC with mutual TLS: Start makes a CA (see PKI), the
	// control plane gets --tls-cert-file, --tls-private-key-file and
	// --client-ca-file, every agent a certificate naming its node.
	TLS bool
	// Logger receives progress and the pods' output (default: discard).
	// Control-plane and agent output goes to one file each in the
	// cluster's directory (removed by Close), read by ControlPlaneLogsAt
	// and AgentLogs.
	Logger *slog.Logger
	// EchoBinary is a built echo server; empty re-execs the running binary,
	// whose main or TestMain must call echo.RunChild first.
	EchoBinary string
	// Binaries are built commands to run; nil builds them into the
	// cluster's directory (launch.BuildSwitchyard).
	Binaries *launch.Binaries
	// Mode, when set, is the control plane's --mode: the dataplane mode
	// every agent must use, sent in NodeConfig (agents start with
	// --mode iptables and follow it).
	Mode string
	// ReplicaModes, when set, is each replica's --mode (replica i gets
	// ReplicaModes[i]; replicas beyond it get Mode), as replicas started
	// with different flags.
	ReplicaModes []string
	// Settings, when set, is the config.yaml of the settings ConfigMap
	// (SettingsConfigMap), created before the control planes start; every
	// replica then reads it (--config-map).
	Settings string
	// APIReadyTimeout bounds the wait for etcd and kube-apiserver to be
	// ready; 0 is apiserver.DefaultReadyTimeout. Under TCG, on a machine
	// busy with other builds, the API server has been seen to need more.
	APIReadyTimeout time.Duration
}

// Cluster is a running API server, control plane, agents and pods.
type Cluster struct {
	API    *apiserver.Server
	Topo   *netns.Topology
	Slices *eps.Client
	// Socket is replica 0's unix socket; Target its gRPC target.
	Socket, Target string
	// PKI is the certificate authority of a TLS cluster; nil without TLS.
	PKI *PKI

	log   *slog.Logger
	mode  string
	modes []string
	// settings: the replicas read SettingsConfigMap.
	settings bool
	dir      string
	bin      launch.Binaries
	cps      []*controlPlane
	agents   []*agent
	life     context.Context // lifetime of pods and agents
	cancel   context.CancelFunc
	closeMu  sync.Once
	nodeIDs  []string
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
	if cfg.ControlPlanes == 0 {
		cfg.ControlPlanes = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	life, cancel := context.WithCancel(context.Background())
	c := &Cluster{log: cfg.Logger, mode: cfg.Mode, modes: cfg.ReplicaModes, settings: cfg.Settings != "", life: life, cancel: cancel}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	if c.dir, err = os.MkdirTemp("", "switchyard-system-"); err != nil {
		return nil, err
	}
	if cfg.Binaries != nil {
		c.bin = *cfg.Binaries
	} else if c.bin, err = launch.BuildSwitchyard(ctx, c.dir, c.log); err != nil {
		return nil, err
	}
	if cfg.TLS {
		if c.PKI, err = NewPKI(filepath.Join(c.dir, "pki")); err != nil {
			return nil, fmt.Errorf("make certificates: %w", err)
		}
	}
	c.log.Info("starting etcd and kube-apiserver")
	if c.API, err = apiserver.StartContext(ctx, apiserver.Config{Logger: c.log, ReadyTimeout: cfg.APIReadyTimeout}); err != nil {
		return nil, fmt.Errorf("start API server: %w", err)
	}
	c.Slices = eps.New(c.API.Client())
	c.log.Info("creating namespaces", "nodes", cfg.Nodes, "pods", cfg.Pods)
	if c.Topo, err = netns.Create(ctx, netns.Spec{Nodes: cfg.Nodes, Pods: cfg.Pods}, netns.Options{Logger: c.log}); err != nil {
		return nil, fmt.Errorf("create topology: %w", err)
	}
	if _, err = echo.StartPods(life, echo.Launcher{Topo: c.Topo, Binary: cfg.EchoBinary}, c.Topo.Pods(),
		echo.Config{TCP: ":" + strconv.Itoa(TargetPort), UDP: ":" + strconv.Itoa(TargetPort), ReportClient: true}); err != nil {
		return nil, fmt.Errorf("start echo pods: %w", err)
	}
	if err = c.createObjects(ctx); err != nil {
		return nil, err
	}
	if c.settings {
		if err = c.PutSettings(ctx, cfg.Settings); err != nil {
			return nil, err
		}
	}
	for i := range cfg.ControlPlanes {
		cp, err := c.newControlPlane(i)
		if err != nil {
			return nil, err
		}
		c.cps = append(c.cps, cp)
		if err := c.startControlPlane(ctx, cp); err != nil {
			return nil, err
		}
	}
	c.Socket, c.Target = c.cps[0].socket, c.cps[0].target
	for _, n := range c.Topo.Nodes() {
		a := c.newAgent(n)
		c.agents = append(c.agents, a)
		if err = c.startAgent(a); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// createObjects creates the namespace, the nodes, the Service and its
// EndpointSlice with every pod.
func (c *Cluster) createObjects(ctx context.Context) error {
	cs := c.API.Client()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	for _, n := range c.Topo.Nodes() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
			corev1.LabelTopologyZone: Zone(n), corev1.LabelHostname: n.Name,
		}}}
		created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		created.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.IP.String()}, {Type: corev1.NodeHostName, Address: n.Name},
		}
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

// Zone is node n's topology.kubernetes.io/zone label: nodes alternate
// between zone-0 and zone-1.
func Zone(n netns.Node) string { return "zone-" + strconv.Itoa(n.Index%2) }

// Endpoint is pod p as the EndpointSlice controller lists a ready pod: its
// address, node name and the node's zone.
func (c *Cluster) Endpoint(p netns.Pod) eps.Endpoint {
	node := c.Topo.Node(p.Node)
	return eps.Ready(p.IP.String()).OnNode(node.Name).InZone(Zone(node))
}

// slice is the Service's EndpointSlice with the given pods as ready endpoints.
func (c *Cluster) slice(pods []netns.Pod) eps.Slice {
	s := eps.Slice{Namespace: Namespace, Service: ServiceName, Suffix: sliceSuffix, Ports: []eps.Port{eps.TCP("http", TargetPort)}}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, c.Endpoint(p))
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

// Close stops agents (by PID) and pods, deletes the namespaces, stops the
// control planes and the API server and removes the temp dir. Idempotent.
func (c *Cluster) Close() error {
	var errs []error
	c.closeMu.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, a := range c.agents {
			if a.proc == nil {
				continue
			}
			if err := a.proc.Stop(agentStopGrace); err != nil {
				c.log.Debug("agent stop", "pid", a.proc.Pid(), "err", err)
			}
		}
		if c.Topo != nil {
			if err := c.Topo.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("tear down namespaces: %w", err))
			}
		}
		for _, cp := range c.cps {
			c.stopControlPlane(cp)
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
