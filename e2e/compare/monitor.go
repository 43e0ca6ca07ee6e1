package compare

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// ruleMonitor runs `nft monitor` in a node namespace and reports when a
// rule holding an address is committed. nf_tables sends one event per new
// rule after the transaction commits, so the time a line arrives is the time
// the rule became present, without dumping a table of thousands of rules
// on every poll. Rules written by iptables-nft arrive translated
// ("dnat to 10.245.0.1:8080"), those of kube-proxy's nftables mode as
// written; legacy iptables rules are not seen (the records name the
// flavour, and the dump poll is always taken as well).
type ruleMonitor struct {
	p *netns.Process

	mu      sync.Mutex
	buf     []byte
	watches map[string]watch
	lines   int
}

// watch is a pending wait for a line that matches.
type watch struct {
	match func([]byte) bool
	ch    chan time.Time
}

// probeTable is created and deleted in the node namespace to learn when
// the monitor is listening: nft reads the whole ruleset before it
// subscribes, and events committed meanwhile are never reported.
const probeTable = "switchyard_compare_probe"

// startMonitor starts `nft monitor` (line-buffered through stdbuf) in ns
// and returns once it reports events; it stops with the topology or ctx.
func startMonitor(ctx context.Context, topo *netns.Topology, ns string, timeout time.Duration) (*ruleMonitor, error) {
	m := &ruleMonitor{watches: map[string]watch{}}
	p, err := topo.Start(ctx, ns, netns.Cmd{Argv: []string{"stdbuf", "-oL", "nft", "monitor"}, Stdout: m})
	if err != nil {
		return nil, fmt.Errorf("start nft monitor: %w", err)
	}
	m.p = p
	ready := m.watchFunc(probeTable, func(line []byte) bool { return bytes.Contains(line, []byte(probeTable)) })
	defer m.unwatch(probeTable)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		// An extra table of our own: no proxy looks at it.
		if _, err := topo.Exec(ctx, ns, "nft", "add table ip "+probeTable+"; delete table ip "+probeTable); err != nil {
			return nil, fmt.Errorf("probe nft monitor: %w", err)
		}
		select {
		case <-ready:
			return m, nil
		case <-time.After(500 * time.Millisecond):
		case <-deadline.C:
			return nil, fmt.Errorf("nft monitor in %s silent after %v", ns, timeout)
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		if err := m.alive(); err != nil {
			return nil, err
		}
	}
}

// watch returns a channel that receives the arrival time of the first
// line holding ip from now on.
func (m *ruleMonitor) watch(ip string) <-chan time.Time { return m.watchFunc(ip, hasIP(ip)) }

func (m *ruleMonitor) watchFunc(key string, match func([]byte) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	m.mu.Lock()
	m.watches[key] = watch{match: match, ch: ch}
	m.mu.Unlock()
	return ch
}

func (m *ruleMonitor) unwatch(key string) {
	m.mu.Lock()
	delete(m.watches, key)
	m.mu.Unlock()
}

// Write receives the monitor's output (os/exec copies with one goroutine).
func (m *ruleMonitor) Write(p []byte) (int, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.buf = append(m.buf, p...)
	for {
		i := bytes.IndexByte(m.buf, '\n')
		if i < 0 {
			break
		}
		line := m.buf[:i]
		m.lines++
		for key, w := range m.watches {
			if w.match(line) {
				w.ch <- now
				delete(m.watches, key)
			}
		}
		m.buf = m.buf[i+1:]
	}
	return len(p), nil
}

// alive reports an error once the monitor has exited.
func (m *ruleMonitor) alive() error {
	select {
	case <-m.p.Done():
		return fmt.Errorf("nft monitor exited: %v", m.p.Err())
	default:
		return nil
	}
}
