package servertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ClientStream is the agent's side of a discovery stream, as
// stream.Stream is the server's; grpc.BidiStreamingClient[Req, Resp]
// satisfies it with pointer type arguments.
type ClientStream[Req stream.Request, Resp proto.Message] interface {
	Send(Req) error
	Recv() (Resp, error)
}

// Wire is what one wire variant adds to an Agent: the RPC that opens its
// stream and the request that acknowledges a response.
type Wire[Req stream.Request, Resp proto.Message] interface {
	Open(ctx context.Context, conn grpc.ClientConnInterface) (ClientStream[Req, Resp], error)
	Ack(r Resp, report *switchyardv1.ApplyReport) Req
}

// Agent is a scripted agent on one discovery stream. Its methods fail
// the test, so call them from the test's goroutine only.
type Agent[Req stream.Request, Resp proto.Message] struct {
	t      testing.TB
	wire   Wire[Req, Resp]
	st     ClientStream[Req, Resp]
	cancel context.CancelFunc
	resps  chan Resp
	done   chan struct{}
	err    error // Recv's error, set before done closes
}

// Open starts a stream on conn and sends first. With read set, a
// goroutine receives responses for Recv; without, nobody reads, and the
// server's sends back up in the transport's flow control. The stream ends
// with the test.
func Open[Req stream.Request, Resp proto.Message](t testing.TB, w Wire[Req, Resp], conn grpc.ClientConnInterface, first Req, read bool) *Agent[Req, Resp] {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	st, err := w.Open(ctx, conn)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	a := &Agent[Req, Resp]{t: t, wire: w, st: st, cancel: cancel, resps: make(chan Resp, 64), done: make(chan struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	if read {
		wg.Go(func() { a.receive(ctx) })
	}
	a.Send(first)
	return a
}

func (a *Agent[Req, Resp]) receive(ctx context.Context) {
	defer close(a.done)
	for {
		r, err := a.st.Recv()
		if err != nil {
			a.err = err
			return
		}
		select {
		case a.resps <- r:
		case <-ctx.Done():
			return
		}
	}
}

// Send sends req or fails the test.
func (a *Agent[Req, Resp]) Send(req Req) {
	a.t.Helper()
	if err := a.st.Send(req); err != nil {
		a.t.Fatalf("Send: %v", err)
	}
}

// Ack acknowledges r as applied, with report (may be nil).
func (a *Agent[Req, Resp]) Ack(r Resp, report *switchyardv1.ApplyReport) {
	a.t.Helper()
	a.Send(a.wire.Ack(r, report))
}

// Recv returns the next response, or fails the test when the stream
// ends or none comes within WaitTimeout.
func (a *Agent[Req, Resp]) Recv() Resp {
	a.t.Helper()
	select {
	case r := <-a.resps:
		return r
	case <-a.done:
		a.t.Fatalf("stream ended: %v", a.err)
	case <-time.After(WaitTimeout):
		a.t.Fatal("no response within the deadline")
	}
	var zero Resp
	return zero
}

// Ended waits for the stream to end and returns its status code; a
// response meanwhile fails the test.
func (a *Agent[Req, Resp]) Ended() codes.Code {
	a.t.Helper()
	select {
	case r := <-a.resps:
		a.t.Fatalf("unexpected response %v", r)
	case <-a.done:
		return status.Code(a.err)
	case <-time.After(WaitTimeout):
		a.t.Fatal("stream did not end within the deadline")
	}
	return codes.OK
}

// Responses delivers what the reading goroutine received.
func (a *Agent[Req, Resp]) Responses() <-chan Resp { return a.resps }

// Done is closed when the stream ended; Err then says why.
func (a *Agent[Req, Resp]) Done() <-chan struct{} { return a.done }

// Err is the stream's end; read it only after Done is closed.
func (a *Agent[Req, Resp]) Err() error { return a.err }

// Stream is the client stream, for sends that must not fail the test
// (from another goroutine).
func (a *Agent[Req, Resp]) Stream() ClientStream[Req, Resp] { return a.st }

// Cancel ends the stream from the agent's side, as a disconnect.
func (a *Agent[Req, Resp]) Cancel() { a.cancel() }
