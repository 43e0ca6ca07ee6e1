package canary

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/metrics"
)

// Run probes the datapath every interval until ctx is done; then it
// closes the listener and returns nil.
func (c *Canary) Run(ctx context.Context) error {
	defer c.closeListener()
	timer := c.cfg.Clock.NewTimer(c.cfg.Interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C():
		}
		start := c.cfg.Clock.Now()
		c.tick(ctx)
		// An interval after this probe started: a probe gives up after
		// half an interval at most, so none ever waits for another.
		timer.Reset(c.cfg.Interval - c.cfg.Clock.Since(start))
	}
}

// tick runs one probe when it can, and records what it found.
func (c *Canary) tick(ctx context.Context) {
	if c.cfg.Armed != nil && !c.cfg.Armed() {
		return
	}
	t := c.target()
	if !t.addr.IsValid() {
		c.skip(t.reason)
		return
	}
	if err := c.listen(ctx, netip.AddrPortFrom(t.addr, c.cfg.Port)); err != nil {
		c.skip(err.Error())
		return
	}
	c.record(c.probe(ctx))
}

// probe connects to the canary's cluster IP and checks that this agent's
// listener answered: the rules the mode programmed forwarded the
// connection from the node to it.
func (c *Canary) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := c.cfg.Dial(ctx, "tcp", c.cfg.VIP.String())
	if err != nil {
		return fmt.Errorf("connect to the canary %s: %w", c.cfg.VIP, err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(d)
	}
	got := make([]byte, len(c.token))
	if _, err := io.ReadFull(conn, got); err != nil {
		return fmt.Errorf("read the canary's answer from %s: %w", c.cfg.VIP, err)
	}
	if !bytes.Equal(got, c.token) {
		return fmt.Errorf("%s answered, but not as this agent's canary listener: the connection was not forwarded to it", c.cfg.VIP)
	}
	return nil
}

// record counts a probe that ran: Failures of them failed in a row make
// the datapath unhealthy, one success healthy again.
func (c *Canary) record(err error) {
	now := c.cfg.Clock.Now()
	c.lastProbe = now
	result, msg := metrics.ProbeOK, ""
	if err != nil {
		c.failures++
		result, msg = metrics.ProbeFailed, err.Error()
	} else {
		c.failures = 0
	}
	was := c.healthy
	c.healthy = c.failures < c.cfg.Failures
	switch {
	case was && !c.healthy:
		c.cfg.Logger.Warn("datapath canary unreachable through the programmed rules; /healthz reports unhealthy",
			"failures", c.failures, "err", err)
	case !was && c.healthy:
		c.cfg.Logger.Info("datapath canary answers through the programmed rules again; /healthz healthy")
	case err != nil && c.healthy:
		c.cfg.Logger.Info("datapath probe failed", "failures", c.failures, "threshold", c.cfg.Failures, "err", err)
	}
	c.skipped = ""
	c.cfg.Metrics.DatapathProbed(result, c.healthy)
	c.cfg.Health.SetDatapath(health.DatapathStatus{Healthy: c.healthy, LastProbe: now, Err: msg})
}

// skip records a probe that could not run: no evidence either way, so
// the datapath counts as healthy and the count of failures starts over.
func (c *Canary) skip(reason string) {
	if reason != c.skipped {
		c.cfg.Logger.Warn("datapath probe skipped", "reason", reason)
	}
	c.skipped = reason
	c.failures, c.healthy = 0, true
	c.cfg.Metrics.DatapathProbed(metrics.ProbeSkipped, true)
	c.cfg.Health.SetDatapath(health.DatapathStatus{Healthy: true, LastProbe: c.lastProbe, Err: "not probed: " + reason})
}
