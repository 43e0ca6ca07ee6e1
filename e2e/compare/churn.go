package compare

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/bench/procstat"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/ruleread"
)

// Defaults of Churn.
const (
	DefaultChurnRate     = 50
	DefaultChurnDuration = 20 * time.Second
	// churnWriters bounds the writes in flight: the API server answers
	// an update in ~10 ms here, so a few keep the rate without a queue.
	churnWriters = 8
)

// Churn adds, after the timed changes, a steady stream of EndpointSlice
// changes (each moves one endpoint of a different service) and measures
// what the proxy spends on it: its process's CPU time and its syncs,
// from the first write until the last change is in its rules.
type Churn struct {
	// Rate is the number of changes a second (default 50).
	Rate int
	// Duration is how long changes are written (default 20 s).
	Duration time.Duration
}

func (c Churn) withDefaults() Churn {
	if c.Rate <= 0 {
		c.Rate = DefaultChurnRate
	}
	if c.Duration <= 0 {
		c.Duration = DefaultChurnDuration
	}
	return c
}

// ChurnResult is what one proxy spent under Churn.
type ChurnResult struct {
	Changes int `json:"changes"`
	// Seconds is the window: the first write until the last change was
	// seen in the rules.
	Seconds float64 `json:"seconds"`
	// LastSeenSeconds is the last write's start until its endpoint was
	// in the rules: how far behind the stream the proxy ended.
	LastSeenSeconds float64 `json:"lastSeenSeconds"`
	// CPUSeconds is the proxy process's user+system time over the
	// window (Switchyard: the agent's; the control plane serves every
	// node and is not counted); CPUMillisPerSecond the same per second
	// of the window (1000: one core busy).
	CPUSeconds         float64 `json:"cpuSeconds"`
	CPUMillisPerSecond float64 `json:"cpuMillisPerSecond"`
	// Syncs is how many syncs the proxy counted over the window
	// (kubeproxy_sync_proxy_rules_duration_seconds_count, both export it).
	Syncs float64 `json:"syncs"`
}

// measureChurn runs e.cfg.Churn against the proxy p (process pid) and
// returns what it cost.
func (e *env) measureChurn(ctx context.Context, d *ruleDumper, p started, scrape func(context.Context) (metrics, error)) (*ChurnResult, error) {
	ch := *e.cfg.Churn
	before, err := scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics before the churn: %w", err)
	}
	cpu0, err := procstat.CPU(p.pid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		firstErr atomic.Value
		sem      = make(chan struct{}, churnWriters)
		lastIdx  int
		lastIP   netip.Addr
		lastAt   time.Time
		n        int
	)
	tick := time.NewTicker(time.Second / time.Duration(ch.Rate))
	defer tick.Stop()
	for time.Since(start) < ch.Duration {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil, context.Cause(ctx)
		case <-tick.C:
		}
		i, ip := e.work.nextChange()
		lastIdx, lastIP, lastAt = i, ip, time.Now()
		n++
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := e.work.applyChange(ctx, nodeName, i, ip); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return nil, fmt.Errorf("churn: %d of %d writes failed, first: %v", f, n, firstErr.Load())
	}
	var reads []time.Duration
	rules, err := d.serviceRules(serviceAddr(lastIdx), &reads)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, e.cfg.ChangeTimeout)
	seen, err := rules.waitUntil(cctx, "the churn's last endpoint "+lastIP.String(), p.alive,
		func(out []byte) bool { return ruleread.HoldsAddr(out, lastIP) })
	cancel()
	if err = errors.Join(err, rules.close()); err != nil {
		return nil, err
	}
	cpu1, err := procstat.CPU(p.pid)
	if err != nil {
		return nil, err
	}
	after, err := scrape(ctx)
	if err != nil {
		return nil, fmt.Errorf("metrics after the churn: %w", err)
	}
	window := seen.Sub(start)
	cpu := cpu1 - cpu0
	return &ChurnResult{Changes: n, Seconds: seconds(window), LastSeenSeconds: seconds(seen.Sub(lastAt)),
		CPUSeconds: seconds(cpu), CPUMillisPerSecond: float64(cpu.Milliseconds()) / window.Seconds(),
		Syncs: after.get(metricSyncCount) - before.get(metricSyncCount)}, nil
}

// writeChurn adds the churn table: every record's CPU and syncs under ch.
func writeChurn(b *strings.Builder, ch *Churn, recs []Record) {
	if ch == nil {
		return
	}
	fmt.Fprintf(b, "\nUnder churn: %d EndpointSlice changes/s for %v (each moves one endpoint of another service), "+
		"from the first write until the last change is in the rules. CPU: the proxy process's user+system time "+
		"(Switchyard: the agent; 1000 ms/s is one core).\n\n", ch.Rate, ch.Duration)
	b.WriteString("| services | run | proxy | changes | window | CPU | CPU ms/s | syncs | syncs/s | last change seen after |\n")
	b.WriteString("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range recs {
		c := r.Churn
		if c == nil {
			continue
		}
		fmt.Fprintf(b, "| %d | %d | %s | %d | %s | %s | %.0f | %.0f | %.1f | %s |\n", r.Services, r.Run, recordName(r),
			c.Changes, secs(c.Seconds), secs(c.CPUSeconds), c.CPUMillisPerSecond, c.Syncs, c.Syncs/c.Seconds, secs(c.LastSeenSeconds))
	}
}
