package syncer

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Peer is the other proxy on the node, kube-proxy, as the hand-over needs
// it; *peer.KubeProxy implements it.
type Peer interface {
	// Adopt removes what the peer left in the kernel, dp forwarding now;
	// resync asks for a full sync at once. It fails while the peer runs.
	Adopt(ctx context.Context, dp dataplane.Dataplane) (resync bool, err error)
	// Returned reports the peer's evidence back in the kernel after Adopt
	// removed it: it runs again.
	Returned(ctx context.Context, dp dataplane.Dataplane) (bool, string, error)
	// Live reports whether the peer runs.
	Live(ctx context.Context) (bool, string)
	// Healthy reports whether it runs and has programmed its rules over
	// those of dp, this agent's dataplane (nil: none programmed yet).
	Healthy(ctx context.Context, dp dataplane.Dataplane) (bool, string)
}

// DefaultPeerCheckInterval is how often the hand-over looks at the peer.
const DefaultPeerCheckInterval = 2 * time.Second

// DefaultPeerGoneAfter is how long the peer's /healthz must stay silent
// before the agent takes the node back: longer than a restart's gap, and
// than kube-proxy's 5 s between attempts to bind its health port while
// this agent still held it (a node just handed back); the peer's rules
// forward meanwhile.
const DefaultPeerGoneAfter = 12 * time.Second

// handover is who forwards on the node.
type handover int

const (
	// forwarding: this agent programs the kernel (the peer's leftovers
	// removed once it can, peerLeft).
	forwarding handover = iota
	// yielding: the peer runs; this agent writes nothing and waits for
	// the peer to say its rules are programmed.
	yielding
	// yielded: the peer forwards; this agent's rules are removed.
	yielded
)

func (s *Syncer) peerInterval() time.Duration {
	if s.cfg.PeerCheckInterval > 0 {
		return s.cfg.PeerCheckInterval
	}
	return DefaultPeerCheckInterval
}

// Holding reports whether the node is handed to the peer: the agent
// writes no rule (its syncs only follow the view) until the peer stops.
func (s *Syncer) Holding() bool { return s.holding.Load() }

// peerAtStart hands the node to a peer that runs when the agent starts,
// before the agent programs anything: two proxies rewriting each other's
// rules (the iptables mode shares kube-proxy's chains) would not drop a
// packet, but neither would hold still. The peer's rules forward until
// it stops; then the agent takes over (checkPeer).
//
// kube-proxy's rules in the kernel while its health port is silent may be
// a stopped kube-proxy's leftovers or a kube-proxy that is just starting
// (it binds the port a moment after it writes its first rules, and
// cannot while this agent holds it): either way the agent hands the node
// to it at start and takes it over only once the port stayed silent for
// PeerGoneAfter. Taking the rules of a starting kube-proxy for leftovers
// removed them, and kube-proxy's nftables mode did not write them again
// for minutes (seen on the real-cluster bed when an agent restarted
// during a hand-back).
func (s *Syncer) peerAtStart(ctx context.Context) {
	if s.cfg.Peer == nil {
		return
	}
	if live, detail := s.cfg.Peer.Live(ctx); live {
		s.yield("kube-proxy runs on this node at start", detail)
		return
	}
	if present, detail, _ := s.cfg.Peer.Returned(ctx, nil); present {
		s.yield("kube-proxy's rules are on this node at start, its health port silent", detail)
		s.peerGone = s.cfg.Clock.Now()
	}
}

// checkPeer moves the hand-over on, at each peer check.
func (s *Syncer) checkPeer(ctx context.Context) {
	switch s.ho {
	case forwarding:
		if !s.synced || s.dp == nil {
			return
		}
		if s.peerLeft {
			s.adoptPeer(ctx)
			return
		}
		s.peerReturned(ctx)
	case yielding:
		if s.peerStopped(ctx) {
			s.resume()
			return
		}
		ok, detail := s.cfg.Peer.Healthy(ctx, s.dp)
		if !ok {
			return
		}
		s.ho = yielded
		if s.dp == nil {
			// Nothing programmed by this process; what an earlier one left
			// (an agent restarted during a hand-back) goes with every
			// mode's leftovers (the iptables mode's, beside kube-proxy's
			// canary, only what kube-proxy never names).
			if s.cfg.CleanOthers != nil {
				if err := s.cfg.CleanOthers(ctx, switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED); err != nil {
					s.cfg.Logger.Warn("removing what this agent's modes left after kube-proxy took over: some failed", "err", err)
				}
			}
			s.cfg.Logger.Info("kube-proxy programmed the node: what this agent's modes left removed", "peer", detail)
			return
		}
		if err := s.dp.Cleanup(ctx); err != nil {
			s.ho = yielding
			s.cfg.Logger.Warn("removing this agent's rules after kube-proxy took over failed; retried", "mode", s.dp.Mode(), "err", err)
			return
		}
		s.cfg.Logger.Info("kube-proxy programmed the node: this agent's rules removed", "mode", s.dp.Mode(), "peer", detail)
	case yielded:
		if s.peerStopped(ctx) {
			s.resume()
		}
	}
}

// peerReturned hands the node to the peer when its rules are back in the
// kernel while this agent forwards (it started again), and reports so.
func (s *Syncer) peerReturned(ctx context.Context) bool {
	if s.cfg.Peer == nil || s.ho != forwarding || s.peerLeft || s.dp == nil {
		return false
	}
	back, detail, err := s.cfg.Peer.Returned(ctx, s.dp)
	if err != nil {
		s.cfg.Logger.Debug("looking for kube-proxy's rules failed", "err", err)
		return false
	}
	if back {
		s.yield("kube-proxy runs again on this node", detail)
	}
	return back
}

// peerStopped reports the peer silent for PeerGoneAfter.
func (s *Syncer) peerStopped(ctx context.Context) bool {
	if live, _ := s.cfg.Peer.Live(ctx); live {
		s.peerGone = time.Time{}
		return false
	}
	now := s.cfg.Clock.Now()
	if s.peerGone.IsZero() {
		s.peerGone = now
	}
	after := s.cfg.PeerGoneAfter
	if after <= 0 {
		after = DefaultPeerGoneAfter
	}
	return now.Sub(s.peerGone) >= after
}

// yield hands the node to the peer: from now on syncs follow the view
// without writing the kernel, and the agent's ports go (kube-proxy's
// health server, which load balancers probe, binds them).
func (s *Syncer) yield(why, detail string) {
	s.ho, s.peerGone = yielding, time.Time{}
	s.holding.Store(true)
	s.cfg.Logger.Warn(why+": handing the node to it; this agent writes no rule until kube-proxy stops", "peer", detail)
	if s.cfg.OnHandover != nil {
		s.cfg.OnHandover(true)
	}
}

// resume takes the node back from a peer that stopped (its rules stay in
// the kernel and forward meanwhile): a full sync at once, then the
// peer's leftovers go.
func (s *Syncer) resume() {
	s.ho, s.peerGone, s.peerLeft, s.fullNow = forwarding, time.Time{}, true, true
	s.holding.Store(false)
	s.cfg.Logger.Info("kube-proxy stopped: this agent takes the node over")
	if s.cfg.OnHandover != nil {
		s.cfg.OnHandover(false)
	}
}

// adoptPeer removes the peer's leftovers once this agent forwards, until
// that succeeds.
func (s *Syncer) adoptPeer(ctx context.Context) {
	if s.cfg.Peer == nil || !s.peerLeft || s.ho != forwarding || !s.synced || s.dp == nil {
		return
	}
	resync, err := s.cfg.Peer.Adopt(ctx, s.dp)
	if err != nil {
		if msg := err.Error(); msg != s.peerErr {
			s.peerErr = msg
			// Draining connections is no failure: this agent forwards new
			// ones, kube-proxy's IPVS keeps its own until they end.
			level := slog.LevelWarn
			if errors.Is(err, dataplane.ErrDraining) {
				level = slog.LevelInfo
			}
			s.cfg.Logger.Log(ctx, level, "kube-proxy's rules stay for now; retried", "mode", s.dp.Mode(), "reason", msg)
		}
		return
	}
	s.peerLeft, s.peerErr = false, ""
	if resync {
		s.fullNow = true
	}
}
