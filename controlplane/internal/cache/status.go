package cache

import (
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// NodeStatus is what the cache knows of one node and its agent.
type NodeStatus struct {
	Name string
	// Known: the control plane has a view for the node. An agent may be
	// connected for a node that is unknown (not yet, or no longer, a Node).
	Known bool
	// DesiredVersion and Resources describe the newest view; empty when
	// unknown.
	DesiredVersion string
	Resources      int

	Connected      bool
	RPC            string // "delta" or "sotw" while connected
	Agent          *switchyardv1.Node
	ConnectedSince time.Time

	// What the agent last acknowledged; kept across reconnects.
	AckedVersion      string
	LastAck           time.Time
	LastApplyDuration time.Duration
	// LastProgrammingLatency is from the latest ACK that reported one
	// (at LastProgrammingLatencyTime): only changes that carry trigger
	// times do, so it may be older than LastAck.
	LastProgrammingLatency     time.Duration
	LastProgrammingLatencyTime time.Time
	LastNack                   *spb.Status
	LastNackTime               time.Time
	// Drift is the agent's drift checks as its latest ACK report had
	// them; nil before one (or from agents that predate it). Never
	// modified: a new report replaces it.
	Drift *switchyardv1.DriftStatus
	// Datapath is the agent's datapath probe as its latest report (an ACK
	// or a report refresh) had it; nil without one. Never modified.
	Datapath *switchyardv1.DatapathStatus

	Pending Pending
}

// Pending is the state queued for a node's stream. It is bounded: DirtyNames
// never exceeds the view's resource count and InFlight is 0 or 1.
type Pending struct {
	DirtyNames int
	DirtyAll   bool
	InFlight   int
}

// NodeSnapshot is one node's status with its newest and acknowledged views
// (either may be nil).
type NodeSnapshot struct {
	Status NodeStatus
	View   NodeView
	Acked  NodeView
}

// ackState is a node's agent bookkeeping; guarded by node.mu.
type ackState struct {
	connected          bool
	rpc                string
	agent              *switchyardv1.Node
	connectedSince     time.Time
	view               NodeView
	lastAck            time.Time
	applyDuration      time.Duration
	programmingLatency time.Duration
	programmingAt      time.Time
	lastNack           *spb.Status
	lastNackTime       time.Time
	drift              *switchyardv1.DriftStatus
	datapath           *switchyardv1.DatapathStatus
}

func (a *ackState) connect(agent *switchyardv1.Node, rpc string, now time.Time) {
	a.connected, a.rpc, a.agent, a.connectedSince = true, rpc, agent, now
}

func (a *ackState) disconnect() {
	a.connected, a.rpc = false, ""
}

func (a *ackState) acked(view NodeView, r *switchyardv1.ApplyReport, now time.Time) {
	a.view, a.lastAck = view, now
	if r != nil {
		a.applyDuration = r.GetApplyDuration().AsDuration()
		// An ACK without a latency measured none (no trigger time came
		// with the change): the last measured one stays.
		if r.GetProgrammingLatency() != nil {
			a.programmingLatency, a.programmingAt = r.GetProgrammingLatency().AsDuration(), now
		}
		a.report(r)
	}
	// The mode and settings the agent programs now: a NodeConfig may have
	// switched them since the stream's first request named them. A copy,
	// because snapshots already handed out share the old message.
	m, h := r.GetMode(), r.GetSettingsHash()
	if m == switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED {
		m = a.agent.GetMode()
	}
	if h == "" {
		h = a.agent.GetSettingsHash()
	}
	if a.agent != nil && (a.agent.GetMode() != m || a.agent.GetSettingsHash() != h) {
		agent := proto.CloneOf(a.agent)
		agent.Mode, agent.SettingsHash = m, h
		a.agent = agent
	}
}

// report keeps what a report says of the agent's checks; a part it
// leaves out keeps the last one.
func (a *ackState) report(r *switchyardv1.ApplyReport) {
	if r.GetDrift() != nil {
		a.drift = r.GetDrift()
	}
	if r.GetDatapath() != nil {
		a.datapath = r.GetDatapath()
	}
}

// Reported records a report refresh: the agent's checks changed while
// its view did not (the acknowledged view stays). Ignored once the watch
// was replaced.
func (w *Watch) Reported(r *switchyardv1.ApplyReport) {
	w.n.mu.Lock()
	defer w.n.mu.Unlock()
	if !w.replaced && r != nil {
		w.n.ack.report(r)
	}
}

func (a *ackState) nacked(st *spb.Status, now time.Time) {
	a.lastNack, a.lastNackTime = st, now
}

func (n *node) snapshot() NodeSnapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	a := &n.ack
	s := NodeStatus{
		Name:                       n.name,
		Known:                      n.view != nil,
		Connected:                  a.connected,
		RPC:                        a.rpc,
		Agent:                      a.agent,
		ConnectedSince:             a.connectedSince,
		LastAck:                    a.lastAck,
		LastApplyDuration:          a.applyDuration,
		LastProgrammingLatency:     a.programmingLatency,
		LastProgrammingLatencyTime: a.programmingAt,
		LastNack:                   a.lastNack,
		LastNackTime:               a.lastNackTime,
		Drift:                      a.drift,
		Datapath:                   a.datapath,
	}
	if n.view != nil {
		s.DesiredVersion, s.Resources = n.view.Version(), n.view.Len()
	}
	if a.view != nil {
		s.AckedVersion = a.view.Version()
	}
	if n.watch != nil {
		s.Pending = n.watch.pending()
	}
	return NodeSnapshot{Status: s, View: n.view, Acked: a.view}
}
