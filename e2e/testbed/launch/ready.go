package launch

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// pollInterval is how often WaitReady probes.
const pollInterval = 20 * time.Millisecond

// tailLines is how much of a log an error quotes.
const tailLines = 30

// WaitReady calls probe until it returns nil. It fails at once, quoting
// the end of p's log, when p exits first, and when ctx ends (bound the wait
// with a deadline on ctx), with the probe's last error.
func WaitReady(ctx context.Context, probe func(context.Context) error, p *Process) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		last := probe(ctx)
		if last == nil {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("not ready: %w", p.Alive())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last probe: %v); last lines of %s:\n%s",
				p.Name, context.Cause(ctx), last, p.LogPath, p.Tail(tailLines))
		case <-tick.C:
		}
	}
}

// Alive is nil while p runs; once it has exited, an error naming the exit
// and quoting the end of its log.
func (p *Process) Alive() error {
	done, err := p.Exited()
	if !done {
		return nil
	}
	return fmt.Errorf("%w; last lines of %s:\n%s", err, p.LogPath, p.Tail(tailLines))
}

// HTTPReady is a probe for WaitReady: GET url must answer 200 OK (a
// /readyz or /healthz endpoint). client nil uses one with a 2 s timeout.
func HTTPReady(client *http.Client, url string) func(context.Context) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// LoopbackAddrs returns n distinct 127.0.0.1 addresses whose ports are free
// right now, for the listen flags of a Loopback process. Another process
// may take a port before the child binds it; WaitReady then reports the
// child's exit.
func LoopbackAddrs(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free loopback port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}
