package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// The traffic a hand-over must not disturb (issue 35): new connections
// from a pod to a ClusterIP and from a node to another node's NodePort,
// long-lived TCP connections carrying a request every interval, and one
// UDP flow (one socket, so one 5-tuple) sending every interval.
const (
	holdNewRate  = 100 // per second, each of the two streams
	holdLongs    = 20
	holdInterval = 100 * time.Millisecond
	holdHTTP     = 80
	holdUDP      = 81
	holdNew      = 82 // serve-hostname: answers a connection with the pod's name, closes it
)

// holdWorkload is pods of agnhost netexec (HTTP with keep-alive on 8080,
// UDP on 8081: "hostname" answers the pod's name) beside serve-hostname
// (AgnhostPort: answers a new connection and closes it, what probe.Stream
// counts), a ClusterIP Service over the three, a NodePort for
// serve-hostname, and a client pod on node-0.
func holdWorkload(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: hold, namespace: %[1]s}
spec:
  replicas: 3
  selector: {matchLabels: {app: hold}}
  template:
    metadata: {labels: {app: hold}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: netexec
          image: %[2]s
          imagePullPolicy: Never
          args: [netexec, --http-port=8080, --udp-port=8081]
          readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
        - name: hostname
          image: %[2]s
          imagePullPolicy: Never
          args: [serve-hostname, --tcp, --http=false, --port=%[6]d]
          readinessProbe: {tcpSocket: {port: %[6]d}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: hold, namespace: %[1]s}
spec:
  selector: {app: hold}
  ports:
    - {name: http, port: %[3]d, targetPort: 8080}
    - {name: udp, protocol: UDP, port: %[4]d, targetPort: 8081}
    - {name: new, port: %[5]d, targetPort: %[6]d}
---
apiVersion: v1
kind: Service
metadata: {name: hold-np, namespace: %[1]s}
spec:
  type: NodePort
  selector: {app: hold}
  ports: [{port: %[5]d, targetPort: %[6]d}]
---
`, ns, images.AgnhostRef, holdHTTP, holdUDP, holdNew, cluster.AgnhostPort) + cluster.ClientPod(ns, 0)
}

// holdTarget is where a bed's hold workload takes traffic: the client
// pod, the ClusterIP's address and node-0's NodePort.
type holdTarget struct {
	c   *cluster.Cluster
	pod cluster.PodRunner
	vip netip.Addr
	np  netip.AddrPort
}

// startHold applies holdWorkload in ns and waits until its pods are
// Ready and its Service has three ready endpoints.
func startHold(t *testing.T, c *cluster.Cluster, ns string) holdTarget {
	t.Helper()
	ctx := t.Context()
	if err := c.Apply(ctx, "hold", holdWorkload(ns)); err != nil {
		t.Fatal(err)
	}
	kubectl(t, c, "-n", ns, "rollout", "status", "deployment/hold", "--timeout=3m")
	kubectl(t, c, "-n", ns, "wait", "pod/client", "--for=condition=Ready", "--timeout=3m")
	waitFor(t, "3 ready endpoints", time.Minute, func() (bool, error) {
		n, err := c.ReadyEndpoints(ctx, ns, "hold")
		return n == 3, err
	})
	podNS, err := c.PodNetNS(ctx, ns, "client")
	if err != nil {
		t.Fatal(err)
	}
	vip, err := c.ServiceAddr(ctx, ns, "hold")
	if err != nil {
		t.Fatal(err)
	}
	port, err := c.NodePort(ctx, ns, "hold-np")
	if err != nil {
		t.Fatal(err)
	}
	return holdTarget{c: c, pod: c.PodRunner(podNS), vip: vip.Addr(), np: netip.AddrPortFrom(cluster.NodeIP(0), port)}
}

// traffic starts every kind of traffic at h (startHoldTraffic).
func (h holdTarget) traffic(t *testing.T) *holdTraffic {
	t.Helper()
	return startHoldTraffic(t, h.c, h.pod, h.vip, h.np)
}

// holdTraffic is one phase's traffic, running until stop.
type holdTraffic struct {
	stop context.CancelFunc
	wg   sync.WaitGroup

	streams [2]struct {
		what string
		res  probe.Result
		err  error
	}
	requests, broken atomic.Int64 // long-lived connections
	longErrs         chan string
	udp              udpFlow
}

// udpFlow is the UDP flow's account: exchanges, the most sends in a row
// left unanswered, the longest time between two answers, and the pods
// that answered, in order (a change: the flow moved to another endpoint).
type udpFlow struct {
	sent, answered int
	maxMissed      int
	maxGap         time.Duration
	pods           []string
	err            error
}

// startHoldTraffic starts every kind of traffic at vip (the ClusterIP's
// address) and np (node-0's NodePort, from node-1).
func startHoldTraffic(t *testing.T, c *cluster.Cluster, pod cluster.PodRunner, vip netip.Addr, np netip.AddrPort) *holdTraffic {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	h := &holdTraffic{stop: stop, longErrs: make(chan string, holdLongs)}
	t.Cleanup(h.end)
	from := []struct {
		what string
		p    *probe.Prober
		to   netip.AddrPort
	}{
		{"client pod → ClusterIP", probe.New(pod, ""), netip.AddrPortFrom(vip, holdNew)},
		{"node-1 → node-0's NodePort", probe.New(c.Topology(), c.NodeNS(1)), np},
	}
	for i, f := range from {
		h.streams[i].what = f.what
		h.wg.Go(func() {
			h.streams[i].res, h.streams[i].err = f.p.Stream(ctx, f.to, probe.StreamOptions{Rate: holdNewRate, Timeout: 2 * time.Second})
		})
	}
	for i := range holdLongs {
		conn, err := dialIn(pod, "tcp", netip.AddrPortFrom(vip, holdHTTP))
		if err != nil {
			t.Fatalf("long-lived connection %d: %v", i, err)
		}
		h.wg.Go(func() { h.longLived(ctx, i, conn) })
	}
	conn, err := dialIn(pod, "udp", netip.AddrPortFrom(vip, holdUDP))
	if err != nil {
		t.Fatalf("UDP flow: %v", err)
	}
	h.wg.Go(func() { h.udp = runUDPFlow(ctx, conn) })
	return h
}

// end stops the traffic and waits for it; idempotent.
func (h *holdTraffic) end() {
	h.stop()
	h.wg.Wait()
}

// dialIn opens a socket inside the pod's network namespace; it stays
// there whichever goroutine uses it.
func dialIn(pod cluster.PodRunner, network string, to netip.AddrPort) (conn net.Conn, err error) {
	if derr := pod.Do("", func() error {
		conn, err = net.DialTimeout(network, to.String(), 2*time.Second)
		return nil
	}); derr != nil {
		return nil, derr
	}
	return conn, err
}

// longLived sends a request every interval on conn, an HTTP/1.1 keep-alive
// connection, until ctx ends; the first failure breaks it for good.
func (h *holdTraffic) longLived(ctx context.Context, i int, conn net.Conn) {
	defer conn.Close()
	rd := bufio.NewReader(conn)
	tick := time.NewTicker(holdInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err := fmt.Fprintf(conn, "GET /hostname HTTP/1.1\r\nHost: hold\r\n\r\n")
		var resp *http.Response
		if err == nil {
			resp, err = http.ReadResponse(rd, nil)
		}
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		if err != nil {
			h.broken.Add(1)
			h.longErrs <- fmt.Sprintf("connection %d broke at %s: %v", i, time.Now().Format("15:04:05.000"), err)
			return
		}
		h.requests.Add(1)
	}
}

// runUDPFlow sends "hostname" every interval on conn and counts answers
// until ctx ends.
func runUDPFlow(ctx context.Context, conn net.Conn) udpFlow {
	defer conn.Close()
	var f udpFlow
	last := time.Now()
	missed := 0
	buf := make([]byte, 512)
	tick := time.NewTicker(holdInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return f
		case <-tick.C:
		}
		f.sent++
		if _, err := conn.Write([]byte("hostname")); err != nil {
			f.err = err
			return f
		}
		_ = conn.SetReadDeadline(time.Now().Add(holdInterval))
		n, err := conn.Read(buf)
		if err != nil {
			missed++
			f.maxMissed = max(f.maxMissed, missed)
			continue
		}
		missed = 0
		f.answered++
		now := time.Now()
		f.maxGap = max(f.maxGap, now.Sub(last))
		last = now
		if pod := string(buf[:n]); len(f.pods) == 0 || f.pods[len(f.pods)-1] != pod {
			f.pods = append(f.pods, pod)
		}
	}
}

// check ends the phase's traffic and fails t on anything disturbed: a
// failed new connection, a broken long-lived one, two UDP sends in a row
// unanswered (an answer late by an interval is read at the next one; the
// longest gap is logged), and, with sameUDPEndpoint, the UDP flow moving
// to another pod (kube-proxy's first sync deletes the conntrack entries
// of every UDP Service it starts with, kubernetes#122740, so a hand-back
// to it may move the flow).
func (h *holdTraffic) check(t *testing.T, phase string, sameUDPEndpoint bool) {
	t.Helper()
	h.end()
	for _, s := range h.streams {
		if s.err != nil {
			t.Errorf("%s: %s: %v", phase, s.what, s.err)
			continue
		}
		t.Logf("%s: %s: %d new connections, %d failed: %s", phase, s.what, s.res.Attempts, len(s.res.Failures), s.res)
		if len(s.res.Failures) > 0 {
			t.Errorf("%s: %s: %d of %d new connections failed: %s", phase, s.what, len(s.res.Failures), s.res.Attempts, firstFailures(s.res))
		}
	}
	close(h.longErrs)
	for e := range h.longErrs {
		t.Errorf("%s: long-lived %s", phase, e)
	}
	t.Logf("%s: %d long-lived connections, %d requests, %d broken", phase, holdLongs, h.requests.Load(), h.broken.Load())
	u := h.udp
	t.Logf("%s: UDP flow: %d sent, %d answered, at most %d in a row unanswered, longest gap between answers %v, answered by %v",
		phase, u.sent, u.answered, u.maxMissed, u.maxGap.Round(time.Millisecond), u.pods)
	if u.err != nil || u.answered == 0 || u.maxMissed > 1 {
		t.Errorf("%s: the UDP flow was interrupted: %d of %d answered, %d sends in a row unanswered (want at most one %v interval), err %v",
			phase, u.answered, u.sent, u.maxMissed, holdInterval, u.err)
	}
	if sameUDPEndpoint && len(u.pods) > 1 {
		t.Errorf("%s: the UDP flow moved between pods %v; its endpoint stayed", phase, u.pods)
	}
}
