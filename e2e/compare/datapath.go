package compare

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/traffic"
)

// Defaults of DataPath.
const (
	DefaultDataPathEndpoints = 3
	DefaultSamples           = 32
	DefaultConnects          = 3000
	DefaultRateWorkers       = 4
	DefaultRateDuration      = 3 * time.Second
	DefaultBulkDuration      = 3 * time.Second
	DefaultDialTimeout       = 2 * time.Second
)

// firstNodePort is the node port of the first sampled service (the API
// server's default range is 30000-32767).
const firstNodePort = 30000

// ProxyNone is the no-proxy baseline's proxy name: the client dials the
// pod itself (mode ModeDirect), the floor every proxy is held against.
const (
	ProxyNone  = "none"
	ModeDirect = "direct"
)

// DataPath turns a comparison into a data-path benchmark: instead of
// EndpointSlice changes, each proxy (and a no-proxy baseline) carries
// traffic from the topology's client namespace, behind the node, to sinks
// in the node's pods (e2e/testbed/traffic). Every service's endpoints are
// those pods, so a connection to any service reaches a listener.
type DataPath struct {
	// Samples is how many services are dialled: the first and the last
	// by creation order and random ones between (default 32, at most
	// the services). They are also the workload's NodePort services.
	Samples int
	// Connects is the number of connects timed per target kind (ClusterIP,
	// NodePort), spread over the samples in turn (default 3000).
	Connects int
	// RateWorkers and RateDuration shape the closed-loop new-connection
	// run (default 4 workers, 3 s).
	RateWorkers  int
	RateDuration time.Duration
	// BulkDuration is how long one connection sends (default 3 s).
	BulkDuration time.Duration
	// DialTimeout bounds one connect (default 2 s).
	DialTimeout time.Duration
}

func (d DataPath) withDefaults() DataPath {
	d.Samples = cmp.Or(d.Samples, DefaultSamples)
	d.Connects = cmp.Or(d.Connects, DefaultConnects)
	d.RateWorkers = cmp.Or(d.RateWorkers, DefaultRateWorkers)
	d.RateDuration = cmp.Or(d.RateDuration, DefaultRateDuration)
	d.BulkDuration = cmp.Or(d.BulkDuration, DefaultBulkDuration)
	d.DialTimeout = cmp.Or(d.DialTimeout, DefaultDialTimeout)
	return d
}

// DataPathResult is what one proxy's data path measured in one run.
type DataPathResult struct {
	ClusterIP traffic.Latency    `json:"clusterIP"`
	NodePort  traffic.Latency    `json:"nodePort"`
	Rate      traffic.RateResult `json:"rate"`
	Bulk      traffic.BulkResult `json:"bulk"`
}

// sampleServices picks n of services: the first, the last and random
// ones between (fixed seed: every proxy and run dials the same ones), in
// ascending order.
func sampleServices(services, n int) []int {
	n = min(n, services, 32767-firstNodePort+1)
	picked := map[int]bool{0: true, services - 1: true}
	r := rand.New(rand.NewPCG(37, uint64(services)))
	for len(picked) < n {
		picked[r.IntN(services)] = true
	}
	out := make([]int, 0, len(picked))
	for i := range picked {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// dpTargets are the addresses one run dials.
type dpTargets struct {
	clusterIP, nodePort []netip.AddrPort
}

// targets are the sampled services' cluster IPs and node ports on the
// node, or, for the baseline, the pods they lead to (the same pod for the
// same sample), dialled directly.
func (e *env) targets(topo *netns.Topology, direct bool) dpTargets {
	var t dpTargets
	node := topo.Node(0).IP
	for k, i := range e.work.sample {
		if direct {
			pod := netip.AddrPortFrom(e.work.podAddrs[i%len(e.work.podAddrs)], targetPort)
			t.clusterIP, t.nodePort = append(t.clusterIP, pod), append(t.nodePort, pod)
			continue
		}
		t.clusterIP = append(t.clusterIP, serviceAddr(i))
		t.nodePort = append(t.nodePort, netip.AddrPortFrom(node, uint16(firstNodePort+k)))
	}
	return t
}

// startSinks opens a traffic sink on the target port in every pod of
// topo; the returned func closes them.
func startSinks(topo *netns.Topology) (func() error, error) {
	var sinks []*traffic.Sink
	closeAll := func() error {
		var errs []error
		for _, s := range sinks {
			errs = append(errs, s.Close())
		}
		return errors.Join(errs...)
	}
	for _, p := range topo.Pods() {
		s, err := traffic.StartSink(topo, p.NS, fmt.Sprintf(":%d", targetPort))
		if err != nil {
			return nil, errors.Join(err, closeAll())
		}
		sinks = append(sinks, s)
	}
	return closeAll, nil
}

// waitReachable waits until every target of t connects from the client:
// the proxy may report a sync before its last listener or rule is in
// place (the userspace mode has no rules to read at all).
func (e *env) waitReachable(ctx context.Context, topo *netns.Topology, t dpTargets, alive func() error) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.SyncTimeout)
	defer cancel()
	all := slices.Concat(t.clusterIP, t.nodePort)
	for {
		lat, err := traffic.Connect(topo, topo.Client().NS, all, len(all), e.cfg.DataPath.DialTimeout)
		if err != nil {
			return err
		}
		if lat.Failed == 0 {
			return nil
		}
		if err := alive(); err != nil {
			return err
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for every target to connect (%d of %d failed, first: %s): %w", lat.Failed, len(all), lat.Error, err)
		}
	}
}

// measureDataPath waits until every target connects, then times
// connects to the cluster IPs and to the node ports, runs the
// new-connection loop over the cluster IPs and one bulk transfer to the
// first sampled service.
func (e *env) measureDataPath(ctx context.Context, n proxyNode, direct bool, alive func() error) error {
	dp := e.cfg.DataPath
	t := e.targets(n.topo, direct)
	if err := e.waitReachable(ctx, n.topo, t, alive); err != nil {
		return err
	}
	client := n.topo.Client().NS
	var res DataPathResult
	var err error
	if res.ClusterIP, err = traffic.Connect(n.topo, client, t.clusterIP, dp.Connects, dp.DialTimeout); err != nil {
		return err
	}
	if res.NodePort, err = traffic.Connect(n.topo, client, t.nodePort, dp.Connects, dp.DialTimeout); err != nil {
		return err
	}
	if res.Rate, err = traffic.Rate(ctx, n.topo, client, t.clusterIP, dp.RateWorkers, dp.RateDuration, dp.DialTimeout); err != nil {
		return err
	}
	if res.Bulk, err = traffic.Bulk(n.topo, client, t.clusterIP[0], dp.BulkDuration, 10*time.Second); err != nil {
		return err
	}
	n.log.Info("data path measured", "clusterIPP50us", res.ClusterIP.P50, "clusterIPP99us", res.ClusterIP.P99,
		"nodePortP50us", res.NodePort.P50, "nodePortP99us", res.NodePort.P99, "connPerSecond", int(res.Rate.PerSecond),
		"cpuUsPerConn", res.Rate.CPUMicrosPerConn, "bulkGbps", res.Bulk.BitsPerSecond/1e9)
	n.rec.DataPath = &res
	return nil
}

// runNoProxy is the baseline: no proxy in the node namespace, the client
// dials the pods.
func (e *env) runNoProxy(ctx context.Context, n proxyNode) error {
	return e.measureDataPath(ctx, n, true, func() error { return nil })
}
