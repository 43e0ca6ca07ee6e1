package compare

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// relay makes a host-namespace TCP address reachable from inside a node
// namespace: it listens on listen inside ns and, for every connection,
// dials target from the host namespace and copies bytes both ways. The
// kube-apiserver listens on the host's loopback, which a namespace cannot
// see; listening on the same address inside the namespace lets kube-proxy
// use the test bed's kubeconfig unchanged (the serving certificate names
// 127.0.0.1). Nothing is configured in the host namespace.
type relay struct {
	l      net.Listener
	target string
	log    *slog.Logger

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func startRelay(topo *netns.Topology, ns, listen, target string, log *slog.Logger) (*relay, error) {
	r := &relay{target: target, log: log, conns: map[net.Conn]struct{}{}}
	err := topo.Do(ns, func() error {
		var err error
		r.l, err = net.Listen("tcp", listen)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("relay listen %s in %s: %w", listen, ns, err)
	}
	r.wg.Go(r.accept)
	return r, nil
}

func (r *relay) accept() {
	for {
		c, err := r.l.Accept()
		if err != nil {
			return // listener closed
		}
		r.wg.Go(func() { r.pipe(c) })
	}
}

func (r *relay) track(c net.Conn, add bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if add {
		if r.conns == nil {
			return false // closed
		}
		r.conns[c] = struct{}{}
	} else if r.conns != nil {
		delete(r.conns, c)
	}
	return true
}

// pipe runs on an unlocked goroutine, so its dial leaves from the host
// namespace.
func (r *relay) pipe(in net.Conn) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		r.log.Warn("relay dial", "target", r.target, "err", err)
		return
	}
	defer out.Close()
	if !r.track(in, true) || !r.track(out, true) {
		return
	}
	defer r.track(in, false)
	defer r.track(out, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	// One direction ended: close both so the other copy returns.
	in.Close()
	out.Close()
	<-done
}

// Close stops accepting, closes every open connection and waits.
func (r *relay) Close() {
	r.l.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.conns = nil
	r.mu.Unlock()
	r.wg.Wait()
}

// nsHTTPClient returns an HTTP client whose connections are opened inside
// ns, for scraping metrics served on the namespace's loopback.
func nsHTTPClient(topo *netns.Topology, ns string) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := topo.Do(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// metrics is one scrape of a Prometheus text endpoint: series (name with
// labels, as written) to value.
type metrics map[string]float64

// scrape reads a proxy's /metrics with c (one that dials in its namespace).
func scrape(ctx context.Context, c *http.Client, url string) (metrics, error) {
	m, err := launch.ScrapeMetrics(ctx, c, url)
	return metrics(m), err
}

// get returns the series name, or its ip_family="IPv4" instance (kube-proxy
// labels most of its metrics with the family; the agent does not).
func (m metrics) get(name string) float64 {
	if v, ok := m[name]; ok {
		return v
	}
	return m[name+`{ip_family="IPv4"}`]
}

// Names of kube-proxy's metrics, which the Switchyard agent exports too.
const (
	metricProgrammingSum   = "kubeproxy_network_programming_duration_seconds_sum"
	metricProgrammingCount = "kubeproxy_network_programming_duration_seconds_count"
	metricLastSync         = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	metricSyncCount        = "kubeproxy_sync_proxy_rules_duration_seconds_count"
)

// programmingDelta returns the latency of the single observation added to
// kube-proxy's network-programming histogram between before and after, or 0
// when not exactly one was added.
func programmingDelta(before, after metrics) float64 {
	if before == nil || after == nil || after.get(metricProgrammingCount)-before.get(metricProgrammingCount) != 1 {
		return 0
	}
	return after.get(metricProgrammingSum) - before.get(metricProgrammingSum)
}

// logTail returns the last n lines of a file, for errors.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
