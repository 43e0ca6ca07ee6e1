package agentsim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Fleet is a set of agents run as goroutines of this process.
type Fleet struct {
	cfg    Config
	agents []*Agent
	wakeC  chan struct{} // capacity 1: some agent progressed or failed
	wg     sync.WaitGroup
	conns  []*grpc.ClientConn
	mu     sync.Mutex
}

// NewFleet returns a fleet of one agent per node name; Start runs them.
func NewFleet(cfg Config, nodes []string) *Fleet {
	if cfg.MaxRecvBytes <= 0 {
		cfg.MaxRecvBytes = DefaultMaxRecvBytes
	}
	if cfg.Mode == "" {
		cfg.Mode = Delta
	}
	f := &Fleet{cfg: cfg, wakeC: make(chan struct{}, 1)}
	for _, n := range nodes {
		f.agents = append(f.agents, &Agent{name: n, cfg: cfg, wake: f.wake})
	}
	return f
}

// Agents returns the agents, in the order of the node names.
func (f *Fleet) Agents() []*Agent { return f.agents }

func (f *Fleet) wake() {
	select {
	case f.wakeC <- struct{}{}:
	default:
	}
}

// Start connects agents [from, to): each dials its own connection, as
// agents on different nodes do, and holds its stream until ctx ends. Stop
// waits for them.
func (f *Fleet) Start(ctx context.Context, from, to int) error {
	for _, a := range f.agents[from:to] {
		conn, err := grpc.NewClient(f.cfg.Target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(f.cfg.MaxRecvBytes)),
			grpc.WithSharedWriteBuffer(true))
		if err != nil {
			return fmt.Errorf("agentsim: dial %s: %w", f.cfg.Target, err)
		}
		f.mu.Lock()
		f.conns = append(f.conns, conn)
		f.mu.Unlock()
		f.wg.Go(func() {
			if err := a.run(ctx, conn); err != nil {
				a.fail(err)
			} else if ctx.Err() != nil {
				a.fail(errStopped)
			}
		})
	}
	return nil
}

// Stop waits for every agent to end (the caller cancels their context)
// and closes the connections.
func (f *Fleet) Stop() {
	f.mu.Lock()
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	f.wg.Wait()
}

// Counts returns every agent's number of complete batches.
func (f *Fleet) Counts() []int {
	out := make([]int, len(f.agents))
	for i, a := range f.agents {
		out[i], _, _, _, _ = a.Stats()
	}
	return out
}

// Bytes returns the bytes and responses every agent received so far.
func (f *Fleet) Bytes() (bytes, responses int64) {
	for _, a := range f.agents {
		_, b, r, _, _ := a.Stats()
		bytes += b
		responses += r
	}
	return bytes, responses
}

// waitRescan is the least time between two scans of the fleet in Wait.
// A scan locks every agent (5,000 at the envelope); rescanning on every
// wake made Wait spin through the whole change, taking a core the control
// plane and the agents under test need. Latencies are the agents' own
// timestamps, so this only delays when Wait notices the last ACK.
const waitRescan = 2 * time.Millisecond

// Wait returns once every agent i with base[i] >= 0 has ACKed more than
// base[i] complete batches, or with an error when one of them failed or
// ctx ended first.
func (f *Fleet) Wait(ctx context.Context, base []int) error {
	for {
		pending := 0
		for i, a := range f.agents {
			if base[i] < 0 {
				continue
			}
			n, _, _, nacks, err := a.Stats()
			if err != nil {
				return fmt.Errorf("agent %s: %w", a.name, err)
			}
			if nacks > 0 {
				return fmt.Errorf("agent %s NACKed %d responses", a.name, nacks)
			}
			if n <= base[i] {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		scanned := time.Now()
		select {
		case <-ctx.Done():
			return fmt.Errorf("agentsim: %d agents still waiting: %w", pending, context.Cause(ctx))
		case <-f.wakeC:
		}
		sleep(ctx, waitRescan-time.Since(scanned))
	}
}
