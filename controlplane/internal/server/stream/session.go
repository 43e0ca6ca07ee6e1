package stream

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/wire"
)

// session is one stream's state, owned by the goroutine running run.
type session[Req Request, Resp proto.Message] struct {
	o       Options
	log     *slog.Logger
	node    string
	watch   *cache.Watch
	variant Variant[Resp]
	out     *sender[*wire.Message]

	nonce   uint64
	flight  *flight       // the response awaiting an answer; nil when none
	applied string        // nonce of the last complete batch acknowledged
	nacked  string        // version last rejected; held until the view changes or retry fires
	nacks   int           // consecutive NACKs, for the retry's backoff
	retry   clock.Timer   // sends the rejected version again; nil when none
	carry   cache.Changes // names to diff again at the next flush
	sentAny bool
	wake    bool      // the view changed since the last flush
	flushAt time.Time // when the last flush took the view
	timer   clock.Timer
}

// flight is a batch being sent, one part at a time.
type flight struct {
	target cache.NodeView
	batch  Batch
	next   int // index of the part after the one in flight
	nonce  string
	sentAt time.Time
}

func (s *session[Req, Resp]) run(ctx context.Context, reqs <-chan Req, recvErr func() error) error {
	defer s.stopTimer()
	defer s.stopRetry()
	if err := s.flush(ctx); err != nil {
		return err
	}
	for {
		var fire, retry <-chan time.Time
		if s.timer != nil {
			fire = s.timer.C()
		}
		if s.retry != nil {
			retry = s.retry.C()
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-s.o.Closing:
			return errClosing
		case <-s.watch.Done():
			return status.Errorf(codes.Aborted, "node %q: replaced by a newer stream", s.node)
		case err := <-s.out.errc:
			return err
		case req, ok := <-reqs:
			if !ok {
				if err := endOfRequests(ctx, recvErr()); err != nil {
					return err
				}
				return s.out.drain(ctx)
			}
			if err := s.answer(ctx, req); err != nil {
				return err
			}
		case <-s.watch.Ready():
			s.wake = true
			if err := s.arm(ctx); err != nil {
				return err
			}
		case <-fire:
			s.timer = nil
			if err := s.flush(ctx); err != nil {
				return err
			}
		case <-retry:
			s.retry = nil
			if s.nacked != "" {
				s.log.Info("sending the rejected version again", "version", s.nacked, "nacks", s.nacks)
				s.nacked, s.wake = "", true
				if err := s.arm(ctx); err != nil {
					return err
				}
			}
		}
	}
}

func (s *session[Req, Resp]) stopRetry() {
	if s.retry != nil {
		s.retry.Stop()
		s.retry = nil
	}
}

// backoff is the wait before the n-th consecutive rejection is retried.
func (s *session[Req, Resp]) backoff(n int) time.Duration {
	d := s.o.NackRetry
	for i := 1; i < n && d < s.o.NackRetryMax; i++ {
		d *= 2
	}
	return min(d, s.o.NackRetryMax)
}

// arm starts the coalesce timer when a change waits and nothing is in
// flight. The window counts from the last flush, as kube-proxy's
// min-sync-period does: a change to an idle session goes out at once, and
// changes that follow within the window wait for it and go out together.
func (s *session[Req, Resp]) arm(ctx context.Context) error {
	if !s.wake || s.flight != nil || s.timer != nil {
		return nil
	}
	d := s.o.CoalesceWindow - s.o.Clock.Since(s.flushAt)
	if d <= 0 {
		return s.flush(ctx)
	}
	s.timer = s.o.Clock.NewTimer(d)
	return nil
}

func (s *session[Req, Resp]) stopTimer() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// flush takes the node's newest view and sends what brings the agent there.
func (s *session[Req, Resp]) flush(ctx context.Context) error {
	nv, changes := s.watch.Take()
	s.wake, s.flushAt = false, s.o.Clock.Now()
	if nv == nil {
		// Unknown node: remember what changed, send nothing.
		s.carry = s.carry.Merge(changes, 0)
		return nil
	}
	changes = s.carry.Merge(changes, nv.Len())
	s.carry = cache.Changes{}
	if s.nacked != "" && nv.Version() == s.nacked {
		s.carry = changes
		s.log.Debug("holding rejected version until the view changes", "version", s.nacked)
		return nil
	}
	b := s.variant.Plan(nv, changes, !s.sentAny)
	if len(b.Parts) == 0 {
		return nil
	}
	s.sentAny = true
	s.flight = &flight{target: nv, batch: b}
	s.watch.SetInFlight(1)
	return s.sendNext(ctx)
}

// sendNext sends the flight's next part.
func (s *session[Req, Resp]) sendNext(ctx context.Context) error {
	f := s.flight
	p := f.batch.Parts[f.next]
	f.next++
	version := ""
	if f.next == len(f.batch.Parts) {
		version = f.target.Version()
	}
	s.nonce++
	f.nonce = strconv.FormatUint(s.nonce, 10)
	f.sentAt = s.o.Clock.Now()
	resp := s.variant.Response(p, version, f.nonce)
	size := proto.Size(resp)
	if size > s.o.MaxMessageBytes {
		s.log.Error("response exceeds the maximum message size; a single resource is too large",
			"bytes", size, "maxBytes", s.o.MaxMessageBytes)
	}
	select {
	case s.out.in <- &wire.Message{Message: resp, Views: p.Resources}:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	s.o.Observer.ResponseSent(s.o.RPC, size)
	s.log.Debug("sent response", "nonce", f.nonce, "version", version,
		"part", f.next, "parts", len(f.batch.Parts),
		"resources", len(p.Resources), "removed", len(p.Removed), "bytes", size)
	return nil
}

// answer handles a request after the first: an ACK or NACK of the response
// in flight, or a stale request to ignore.
func (s *session[Req, Resp]) answer(ctx context.Context, req Req) error {
	f := s.flight
	nonce := req.GetResponseNonce()
	if f == nil && nonce != "" && nonce == s.applied && req.GetErrorDetail() == nil {
		// A report refresh: the agent's checks changed, its view did not.
		s.watch.Reported(req.GetReport())
		return nil
	}
	if f == nil || nonce != f.nonce {
		s.log.Debug("ignoring stale request", "nonce", nonce)
		return nil
	}
	latency := s.o.Clock.Since(f.sentAt)
	if st := req.GetErrorDetail(); st != nil {
		s.flight = nil
		s.watch.SetInFlight(0)
		s.nacked = f.target.Version()
		s.carry = s.carry.Merge(cache.Changes{Names: f.batch.Names()}, f.target.Len())
		s.watch.Nacked(st)
		s.o.Observer.Nacked(s.o.RPC)
		s.nacks++
		wait := s.backoff(s.nacks)
		s.stopRetry()
		s.retry = s.o.Clock.NewTimer(wait)
		s.log.Warn("agent rejected view", "version", s.nacked, "nonce", nonce,
			"code", codes.Code(st.GetCode()).String(), "message", st.GetMessage(), "retryIn", wait)
		return s.arm(ctx)
	}
	s.o.Observer.Acked(s.o.RPC, latency)
	if f.next < len(f.batch.Parts) {
		return s.sendNext(ctx)
	}
	s.flight = nil
	s.applied = nonce
	s.watch.SetInFlight(0)
	s.nacked, s.nacks = "", 0
	s.stopRetry()
	s.variant.Applied(f.target)
	s.watch.Acked(f.target, req.GetReport())
	r := req.GetReport()
	s.o.Observer.AgentApplied(r.GetApplyDuration().AsDuration(), r.GetProgrammingLatency().AsDuration())
	s.log.Debug("agent applied view", "version", f.target.Version(), "ackLatency", latency)
	return s.arm(ctx)
}
