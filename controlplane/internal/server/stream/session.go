package stream

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/wire"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
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
	// missing: the node has no view (no Node object); reported once per
	// episode, and told to the Observer.
	missing bool
	wake    bool      // the view changed since the last flush
	flushAt time.Time // when the last flush took the view
	timer   clock.Timer
}

// flight is a batch being sent, one part at a time.
type flight struct {
	target cache.NodeView
	batch  Batch
	// since and until are the generations of the changes the batch
	// brings (cache.Changes), kept for a NACK's carry.
	since, until uint64
	next         int // index of the part after the one in flight
	nonce        string
	sentAt       time.Time
}

func (s *session[Req, Resp]) run(ctx context.Context, reqs <-chan Req, recvErr func() error) error {
	defer s.stopTimer()
	defer s.stopRetry()
	defer func() {
		if s.missing {
			s.o.Observer.NodeMissing(false)
		}
	}()
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
	s.nodeObject(nv != nil)
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
	first := !s.sentAny
	b := s.variant.Plan(nv, changes, first)
	if len(b.Parts) == 0 {
		return nil
	}
	if !first {
		// A stream's first batch brings the agent up to date after a
		// (re)connect: no change, no trigger time.
		s.attachTriggers(b, changes)
	}
	s.sentAny = true
	s.flight = &flight{target: nv, batch: b, since: changes.Since, until: changes.Until}
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
	if size > s.o.MaxMessageBytes && len(p.Triggers) > 0 {
		// Pack sized the part without its trigger times: a response the
		// agent can read matters more than their observations.
		s.log.Debug("dropping a part's trigger times to stay within the maximum message size",
			"bytes", size, "maxBytes", s.o.MaxMessageBytes, "resources", len(p.Triggers))
		p.Triggers = nil
		resp = s.variant.Response(p, version, f.nonce)
		size = proto.Size(resp)
	}
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
		s.carry = s.carry.Merge(cache.Changes{Names: f.batch.Names(), Since: f.since, Until: f.until}, f.target.Len())
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

// attachTriggers gives each part of b the trigger times of the changes its
// resources bring: those published in changes.Since..Until that reached
// this node, for the names changes lists (every name when All).
func (s *session[Req, Resp]) attachTriggers(b Batch, changes cache.Changes) {
	if s.o.Triggers == nil || changes.Since == 0 {
		return
	}
	for i := range b.Parts {
		p := &b.Parts[i]
		for _, v := range p.Resources {
			if !changes.All {
				if _, ok := slices.BinarySearch(changes.Names, v.Name); !ok {
					continue // the state of the world resends it unchanged
				}
			}
			times := s.o.Triggers.Triggers(v.Name, changes.Since, changes.Until, s.node)
			if len(times) == 0 {
				continue
			}
			ct := &switchyardv1.ChangeTriggers{Name: v.Name, TriggerTimes: make([]*timestamppb.Timestamp, len(times))}
			for j, t := range times {
				ct.TriggerTimes[j] = timestamppb.New(t)
			}
			p.Triggers = append(p.Triggers, ct)
		}
	}
}

// nodeObject notes whether the node has a view, which the watch publishes
// for Node objects only. A node without one gets nothing: its agent keeps
// the rules it last applied, which is safe (a Node deleted by mistake, or
// re-created by its kubelet, must not take Service forwarding with it) but
// silent, so the first flush of such an episode says so, once.
func (s *session[Req, Resp]) nodeObject(present bool) {
	switch {
	case !present && !s.missing:
		s.missing = true
		s.o.Observer.NodeMissing(true)
		s.log.Warn("agent connected for a node with no Node object: it keeps its last applied rules and receives no change until the Node exists")
	case present && s.missing:
		s.missing = false
		s.o.Observer.NodeMissing(false)
		s.log.Info("the node's Node object exists again: sending its view")
	}
}
