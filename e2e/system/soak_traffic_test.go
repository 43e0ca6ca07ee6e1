package system_test

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// streamResult is one source's stream of connections to the echo VIP.
type streamResult struct {
	source string
	rate   int
	start  time.Time
	res    probe.Result
	err    error
}

// traffic runs the soak's connections until ctx ends: cfg.rate new
// connections a second in all, shared between every node's namespace (the
// OUTPUT path) and the client's (PREROUTING on node-0, its gateway).
func (s *soak) traffic(ctx context.Context) []streamResult {
	srcs := sources(s.c)
	out := make([]streamResult, len(srcs))
	var wg sync.WaitGroup
	for i, src := range srcs {
		rate := s.cfg.rate / len(srcs)
		if i < s.cfg.rate%len(srcs) {
			rate++
		}
		out[i] = streamResult{source: src.name, rate: rate}
		if rate == 0 {
			continue
		}
		wg.Go(func() {
			out[i].start = time.Now()
			out[i].res, out[i].err = probe.New(s.c.Topo, src.ns).Stream(ctx, s.c.VIP(),
				probe.StreamOptions{Rate: rate, Timeout: attemptTimout})
		})
	}
	wg.Wait()
	return out
}

// failedConn is one failed connection, placed in the soak's time.
type failedConn struct {
	at     time.Duration // when the attempt began, since the soak started
	source string
	reason probe.Reason
	err    string
}

// failures lists every stream's failed connections in time order. A
// probe failure carries when the attempt ended; a timeout began
// attemptTimout earlier, the others end at once, so that is when it began.
func failures(soakStart time.Time, streams []streamResult) []failedConn {
	var out []failedConn
	for _, st := range streams {
		for _, f := range st.res.Failures {
			at := st.start.Add(f.At).Sub(soakStart)
			if f.Reason == probe.ReasonTimeout {
				at -= attemptTimout
			}
			out = append(out, failedConn{at: at, source: st.source, reason: f.Reason, err: f.Err.Error()})
		}
	}
	slices.SortStableFunc(out, func(a, b failedConn) int { return int(a.at - b.at) })
	return out
}
