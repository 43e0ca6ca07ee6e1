package agentsim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Mode is the discovery RPC an agent uses.
type Mode string

// Modes.
const (
	Delta Mode = "delta" // DeltaSnapshots, what the real agent uses
	SotW  Mode = "sotw"  // StreamSnapshots: the whole view per change
)

// DefaultMaxRecvBytes bounds one response; the control plane splits larger
// batches at its own (smaller) limit.
const DefaultMaxRecvBytes = 64 << 20

// Config configures every agent of a Fleet.
type Config struct {
	// Target is the control plane's gRPC address.
	Target string
	Mode   Mode
	// ApplyDelay is how long an agent "applies" a complete batch before
	// it ACKs it.
	ApplyDelay time.Duration
	// MaxRecvBytes defaults to DefaultMaxRecvBytes.
	MaxRecvBytes int
	// Decode also unmarshals every response into its message type and
	// checks that proto.Size equals the wire size (costly; for tests).
	Decode bool
}

// Batch is one complete batch an agent ACKed.
type Batch struct {
	Version string
	// First is when the batch's first part arrived, Acked when the ACK of
	// its last part was sent.
	First, Acked time.Time
	Parts        int
	Resources    int
	Removed      int
	Bytes        int64 // wire size of its responses, proto.Size of each
}

// Agent is one simulated node agent.
type Agent struct {
	name string
	cfg  Config
	wake func()

	mu        sync.Mutex
	batches   []Batch
	bytes     int64 // every response, in or out of a batch
	responses int64
	nacks     int
	err       error
}

// Name is the node the agent subscribes as.
func (a *Agent) Name() string { return a.name }

// Stats returns the number of complete batches ACKed, total bytes and
// responses received, NACKs sent, and the error that ended the stream.
func (a *Agent) Stats() (batches int, bytes, responses int64, nacks int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.batches), a.bytes, a.responses, a.nacks, a.err
}

// Batch returns the i-th complete batch.
func (a *Agent) Batch(i int) Batch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.batches[i]
}

// run holds the agent's stream until ctx ends or the stream fails.
func (a *Agent) run(ctx context.Context, conn *grpc.ClientConn) error {
	desc, method, lay, newResp := &switchyardv1.DiscoveryService_ServiceDesc.Streams[0],
		"/switchyard.v1.DiscoveryService/DeltaSnapshots", deltaLayout,
		func() proto.Message { return new(switchyardv1.DeltaSnapshotsResponse) }
	var first proto.Message = &switchyardv1.DeltaSnapshotsRequest{Node: a.node()}
	if a.cfg.Mode == SotW {
		desc, method, lay = &switchyardv1.DiscoveryService_ServiceDesc.Streams[1],
			"/switchyard.v1.DiscoveryService/StreamSnapshots", sotwLayout
		newResp = func() proto.Message { return new(switchyardv1.StreamSnapshotsResponse) }
		first = &switchyardv1.StreamSnapshotsRequest{Node: a.node()}
	}
	c := &codec{layout: lay}
	if a.cfg.Decode {
		c.decode = newResp
	}
	st, err := conn.NewStream(ctx, desc, method, grpc.ForceCodecV2(c))
	if err != nil {
		return fmt.Errorf("agent %s: open stream: %w", a.name, err)
	}
	if err := st.SendMsg(first); err != nil {
		return fmt.Errorf("agent %s: send: %w", a.name, err)
	}
	var cur *Batch
	for {
		var f frame
		if err := st.RecvMsg(&f); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("agent %s: receive: %w", a.name, err)
		}
		now := time.Now()
		if cur == nil {
			cur = &Batch{First: now}
		}
		cur.Parts++
		cur.Resources += f.resources
		cur.Removed += f.removed
		cur.Bytes += int64(f.size)
		a.mu.Lock()
		a.bytes += int64(f.size)
		a.responses++
		a.mu.Unlock()

		req, done := a.answer(ctx, &f)
		if done && f.invalid == nil {
			cur.Version, cur.Acked = f.version, time.Now()
		}
		if err := st.SendMsg(req); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("agent %s: send: %w", a.name, err)
		}
		if done {
			a.finish(cur, f.invalid != nil)
			cur = nil
		}
	}
}

// answer builds the request that answers f, as the real agent does; done
// reports that f ended a batch (its last part, or a NACK).
func (a *Agent) answer(ctx context.Context, f *frame) (req proto.Message, done bool) {
	var errDetail *status.Status
	if f.invalid != nil {
		errDetail = status.New(codes.InvalidArgument, f.invalid.Error())
	}
	complete := f.version != "" && errDetail == nil
	var report *switchyardv1.ApplyReport
	if complete {
		start := time.Now()
		sleep(ctx, a.cfg.ApplyDelay)
		report = &switchyardv1.ApplyReport{ApplyDuration: durationpb.New(time.Since(start))}
	}
	if a.cfg.Mode == SotW {
		r := &switchyardv1.StreamSnapshotsRequest{ResponseNonce: f.nonce, Report: report}
		if complete {
			r.VersionInfo = f.version
		}
		if errDetail != nil {
			r.ErrorDetail = errDetail.Proto()
		}
		return r, complete || errDetail != nil
	}
	r := &switchyardv1.DeltaSnapshotsRequest{ResponseNonce: f.nonce, Report: report}
	if complete {
		r.AppliedVersion = f.version
	}
	if errDetail != nil {
		r.ErrorDetail = errDetail.Proto()
	}
	return r, complete || errDetail != nil
}

func (a *Agent) finish(b *Batch, nacked bool) {
	a.mu.Lock()
	if nacked {
		a.nacks++
	} else {
		a.batches = append(a.batches, *b)
	}
	a.mu.Unlock()
	a.wake()
}

func (a *Agent) node() *switchyardv1.Node {
	return &switchyardv1.Node{Name: a.name, AgentVersion: "agentsim", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN}
}

func (a *Agent) fail(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
	a.wake()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

var errStopped = errors.New("agentsim: fleet stopped")
