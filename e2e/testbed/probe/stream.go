package probe

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// StreamOptions tune Stream.
type StreamOptions struct {
	// Network is "tcp" (default) or "udp" (a new socket per attempt).
	Network string
	// Rate is attempts per second (default 100).
	Rate int
	// Duration ends the stream (default: run until ctx is done).
	Duration time.Duration
	// Timeout bounds each attempt (default DefaultTimeout).
	Timeout time.Duration
	// MaxInFlight bounds concurrent attempts; a tick that finds it reached is
	// counted in Result.Skipped. Default: enough for Rate at Timeout, twice.
	MaxInFlight int
	// Payload is the UDP datagram (default "probe").
	Payload []byte
}

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Network == "" {
		o.Network = "tcp"
	}
	if o.Rate == 0 {
		o.Rate = 100
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = max(1, int(2*float64(o.Rate)*o.Timeout.Seconds())+1)
	}
	if o.Payload == nil {
		o.Payload = defaultPayload
	}
	return o
}

func (o StreamOptions) validate() error {
	switch {
	case o.Network != "tcp" && o.Network != "udp":
		return fmt.Errorf("probe: network %q is neither tcp nor udp", o.Network)
	case o.Rate < 0 || o.Rate > 100000:
		return fmt.Errorf("probe: rate %d out of range (0,100000]", o.Rate)
	case o.Duration < 0 || o.Timeout < 0 || o.MaxInFlight < 0:
		return fmt.Errorf("probe: negative option in %+v", o)
	}
	return nil
}

// Stream makes attempts at opts.Rate per second until opts.Duration has
// passed or ctx is done (a normal end, not an error), then waits for the
// attempts in flight, which finish on their own timeout.
func (p *Prober) Stream(ctx context.Context, addr netip.AddrPort, opts StreamOptions) (Result, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return Result{}, err
	}
	once := p.tcpAttempt(addr, netip.AddrPort{}, opts.Timeout)
	if opts.Network == "udp" {
		once = p.udpAttempt(addr, opts.Timeout, opts.Payload, nil)
	}
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	// Attempts outlive the stream's end by at most their timeout.
	attemptCtx, abort := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abort(nil)
	rec := newRecorder()
	inflight := make(chan struct{}, opts.MaxInFlight)
	tick := time.NewTicker(time.Second / time.Duration(opts.Rate))
	defer tick.Stop()
	var wg sync.WaitGroup
loop:
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			break loop
		case <-attemptCtx.Done():
			break loop
		case <-tick.C:
		}
		select {
		case inflight <- struct{}{}:
		default:
			rec.skip()
			continue
		}
		wg.Go(func() {
			defer func() { <-inflight }()
			reply, err := once(attemptCtx)
			var re *runnerError
			if errors.As(err, &re) {
				abort(err)
				return
			}
			rec.add(i, reply, err)
		})
	}
	wg.Wait()
	return rec.result(), context.Cause(attemptCtx)
}
