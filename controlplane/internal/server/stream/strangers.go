package stream

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultMaxStrangers bounds the streams open at once for names the control
// plane has no view for.
const DefaultMaxStrangers = 100

// Strangers admits streams. A stream for a node the control plane has a
// view of is always admitted; one for any other name (a node that is not
// yet, or no longer, a Node, or a name nobody runs) holds one of Max slots
// for its lifetime, and is refused with ResourceExhausted when none is
// free. Such streams are legitimate for seconds at a time — an agent may
// connect before the watch saw its Node — but each costs the cache an
// entry, a watch and a session for as long as it stays, so a client that
// opens them by the thousand must not grow the control plane without
// bound, and must never crowd out a real node: known nodes take no slot.
//
// Until the first views are published (Ready) every node is unknown, so
// a stream waits for them before it is classified: a control-plane restart
// that thousands of agents reconnect to does not fill the slots with real
// nodes.
type Strangers struct {
	// Known reports whether the control plane has a view for node;
	// (*cache.Cache).View's second result.
	Known func(node string) bool
	// Ready, when set, is closed once the first views are published.
	Ready <-chan struct{}
	// Max is the number of slots; DefaultMaxStrangers when zero, none
	// when negative.
	Max int
	// Observer is told about admissions; nil records nothing.
	Observer StrangerObserver

	mu   sync.Mutex
	open int
}

// StrangerObserver receives admissions, for metrics.
type StrangerObserver interface {
	// StrangerStreams is the number of open streams holding a slot.
	StrangerStreams(open int)
	// StrangerRefused counts a stream refused for want of a slot.
	StrangerRefused()
}

// Admit decides on a stream for node. The stream must call release when it
// ends (also when err is nil and no slot was taken). It waits for Ready,
// ctx or closing.
func (s *Strangers) Admit(ctx context.Context, closing <-chan struct{}, node string) (release func(), err error) {
	nothing := func() {}
	if s == nil || s.Known == nil {
		return nothing, nil
	}
	if s.Ready != nil {
		select {
		case <-s.Ready:
		case <-ctx.Done():
			return nothing, status.FromContextError(ctx.Err()).Err()
		case <-closing:
			return nothing, errClosing
		}
	}
	if s.Known(node) {
		return nothing, nil
	}
	limit := s.Max
	if limit == 0 {
		limit = DefaultMaxStrangers
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= limit {
		if s.Observer != nil {
			s.Observer.StrangerRefused()
		}
		return nothing, status.Errorf(codes.ResourceExhausted,
			"node %q is not a Node this control plane knows, and %d streams for such names are open already (--max-unknown-node-streams); retry once the Node exists",
			node, max(limit, 0))
	}
	s.open++
	s.observe()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.open--
			s.observe()
		})
	}, nil
}

// observe reports the open count; s.mu held.
func (s *Strangers) observe() {
	if s.Observer != nil {
		s.Observer.StrangerStreams(s.open)
	}
}
