package stream

import "time"

// Observer receives what streams do, for metrics. *metrics.Metrics
// implements it.
type Observer interface {
	StreamOpened(rpc string)
	StreamClosed(rpc string)
	ResponseSent(rpc string, bytes int)
	Acked(rpc string, latency time.Duration)
	Nacked(rpc string)
	// AgentApplied reports an ACK's apply duration and programming latency
	// (zero when the agent did not report them).
	AgentApplied(apply, programming time.Duration)
	// NodeMissing reports that a stream's node lost (true) or regained
	// (false) its Node object, or that a stream without one ended (false):
	// a gauge of connected agents that receive no change.
	NodeMissing(missing bool)
}

// nopObserver records nothing.
type nopObserver struct{}

var _ Observer = nopObserver{}

func (nopObserver) StreamOpened(string)                       {}
func (nopObserver) StreamClosed(string)                       {}
func (nopObserver) ResponseSent(string, int)                  {}
func (nopObserver) Acked(string, time.Duration)               {}
func (nopObserver) Nacked(string)                             {}
func (nopObserver) AgentApplied(time.Duration, time.Duration) {}
func (nopObserver) NodeMissing(bool)                          {}
