package cluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
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

// udpFlow is the UDP flow's account. Each send is "echo <n>" (netexec
// answers n), every tenth "hostname" (it answers the pod's name, which
// is matched to the newest hostname send),
// so an answer is matched to its send however late it comes: a lost
// datagram (the flow interrupted) is told apart from a late one (a loaded
// machine). pods are the pods that answered, in order (a change: the
// flow moved to another endpoint).
type udpFlow struct {
	sent, answered int
	maxLost        int           // the most sends in a row never answered
	maxDelay       time.Duration // the longest a send waited for its answer
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

// udpGrace is how long answers are still read after the last send.
const udpGrace = time.Second

// runUDPFlow sends every interval on conn until ctx ends, then reads
// answers for udpGrace more and accounts for each send.
func runUDPFlow(ctx context.Context, conn net.Conn) udpFlow {
	defer conn.Close()
	var (
		f      udpFlow
		mu     sync.Mutex
		sentAt = map[int]time.Time{}
		gotAt  = map[int]time.Time{}
		last   = -1 // the newest send
		done   = make(chan struct{})
	)
	go func() { // the reader: until the grace after the last send
		defer close(done)
		buf := make([]byte, 512)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() || errors.Is(err, net.ErrClosed) {
					return // the deadline set after the last send
				}
				// An ICMP error (a send refused): the flow was disturbed.
				mu.Lock()
				if f.err == nil {
					f.err = err
				}
				mu.Unlock()
				continue
			}
			now := time.Now()
			reply := string(buf[:n])
			mu.Lock()
			seq, err := strconv.Atoi(reply)
			if err != nil {
				// The newest hostname send: an answer later than nine
				// intervals would be taken for the next one's.
				seq = max(last, 0) / 10 * 10
				if len(f.pods) == 0 || f.pods[len(f.pods)-1] != reply {
					f.pods = append(f.pods, reply)
				}
			}
			if _, dup := gotAt[seq]; !dup {
				gotAt[seq] = now
			}
			mu.Unlock()
		}
	}()
	tick := time.NewTicker(holdInterval)
	defer tick.Stop()
send:
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			break send
		case <-tick.C:
		}
		msg := "hostname"
		if i%10 != 0 {
			msg = "echo " + strconv.Itoa(i)
		}
		mu.Lock()
		sentAt[i], last = time.Now(), i
		mu.Unlock()
		f.sent++
		if _, err := conn.Write([]byte(msg)); err != nil {
			mu.Lock()
			f.err = err
			mu.Unlock()
			break
		}
	}
	_ = conn.SetReadDeadline(time.Now().Add(udpGrace))
	<-done
	mu.Lock()
	defer mu.Unlock()
	lost := 0
	for i := range f.sent {
		got, ok := gotAt[i]
		if !ok {
			lost++
			f.maxLost = max(f.maxLost, lost)
			continue
		}
		lost = 0
		f.answered++
		f.maxDelay = max(f.maxDelay, got.Sub(sentAt[i]))
	}
	return f
}

// check ends the phase's traffic and fails t on anything disturbed: a
// failed new connection, a broken long-lived one, two UDP sends in a row
// never answered (a late answer still counts: on a loaded machine one
// came 275 ms late; the longest wait is logged), and, with
// sameUDPEndpoint, the UDP flow moving
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
	t.Logf("%s: UDP flow: %d sent, %d answered, at most %d in a row never answered, longest wait for an answer %v, answered by %v",
		phase, u.sent, u.answered, u.maxLost, u.maxDelay.Round(time.Millisecond), u.pods)
	if u.err != nil || u.answered == 0 || u.maxLost > 1 {
		t.Errorf("%s: the UDP flow was interrupted: %d of %d answered, %d sends in a row never answered (want at most one %v interval), err %v",
			phase, u.answered, u.sent, u.maxLost, holdInterval, u.err)
	}
	if sameUDPEndpoint && len(u.pods) > 1 {
		t.Errorf("%s: the UDP flow moved between pods %v; its endpoint stayed", phase, u.pods)
	}
}
