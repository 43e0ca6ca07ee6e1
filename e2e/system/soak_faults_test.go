package system_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/system"
)

// Kinds of fault: each kill is SIGKILL (no graceful shutdown).
const (
	kindAgent        = "agent"        // one node's switchyard-agent; its rules stay in the kernel
	kindControlPlane = "controlplane" // one of the two replicas; its agents fail over to the other
	kindAPIServer    = "apiserver"    // kube-apiserver alone; etcd keeps the data
)

// faultKinds is the order reports list the kinds in.
var faultKinds = []string{kindAgent, kindControlPlane, kindAPIServer}

// faultPlan is how often one kind of fault comes and how long the process
// stays down, each drawn uniformly from its range. One loop per kind, so
// faults of different kinds overlap but at most one process of a kind is
// down at a time: a replica always serves, and the soak measures
// recovery, not a cluster that has nothing left.
type faultPlan struct {
	kind      string
	gap, down [2]time.Duration // gap: from one recovery to the next kill
	times     int              // faults to inject; 0: until the soak ends
}

// soakPlans give about 15 agent kills, 10 replica kills and 5 API-server
// outages in 10 minutes.
var soakPlans = []faultPlan{
	{kind: kindAgent, gap: [2]time.Duration{15 * time.Second, 45 * time.Second}, down: [2]time.Duration{time.Second, 10 * time.Second}},
	{kind: kindControlPlane, gap: [2]time.Duration{20 * time.Second, 60 * time.Second}, down: [2]time.Duration{time.Second, 15 * time.Second}},
	{kind: kindAPIServer, gap: [2]time.Duration{45 * time.Second, 120 * time.Second}, down: [2]time.Duration{5 * time.Second, 30 * time.Second}},
}

// faultRecord is one injected fault. Offsets are since the soak started.
type faultRecord struct {
	Seq    int    `json:"seq"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// KilledAt: SIGKILL sent; RestartedAt: the new process launched (it
	// was down for Down: the planned downtime, plus for a replica the rest
	// of an API-server outage); RestartTook: until the harness saw it ready.
	KilledAt    msDuration `json:"killedAtMs"`
	RestartedAt msDuration `json:"restartedAtMs"`
	Down        msDuration `json:"downMs"`
	RestartTook msDuration `json:"restartTookMs"`
	// Recovery: from the restart until the target is back in service (an
	// agent: reconnected and acked; a replica: ready with every agent
	// acked somewhere; the API server: every replica's views fresh).
	Recovery  msDuration `json:"recoveryMs"`
	Recovered bool       `json:"recovered"`
	// Failover (control plane only): from the kill until every agent
	// acked on the other replica; Moved is how many agents had to move.
	Failover *msDuration `json:"failoverMs,omitempty"`
	Moved    int         `json:"moved,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// end is when the fault stopped counting as in progress.
func (f faultRecord) end(soakEnd time.Duration) time.Duration {
	if !f.Recovered {
		return soakEnd
	}
	return time.Duration(f.RestartedAt + f.Recovery)
}

// faultOps are one kind's operations on its target i.
type faultOps struct {
	targets int
	name    func(i int) string
	kill    func(i int) error
	restart func(ctx context.Context, i int) error
	// hold, when set, waits until the restart may begin and returns what
	// ends that permission, once the restart is done.
	hold func() (release func())
	// recovered says whether target i is back in service after a restart
	// at since.
	recovered func(ctx context.Context, i int, since time.Time) (bool, string)
	// exited, when set, is closed when target i's current process exits.
	exited func(i int) <-chan struct{}
}

func agentTarget(c *system.Cluster, i int) string { return kindAgent + "/" + c.NodeNames()[i] }
func controlPlaneTarget(i int) string             { return fmt.Sprintf("%s/cp-%d", kindControlPlane, i) }

// faultOps returns every kind's operations, by kind.
func (s *soak) faultOps() map[string]faultOps {
	return map[string]faultOps{
		kindAgent: {
			targets: len(s.c.NodeNames()),
			name:    func(i int) string { return agentTarget(s.c, i) },
			kill:    s.c.KillAgent,
			restart: func(_ context.Context, i int) error { return s.c.RestartAgent(i) },
			recovered: func(ctx context.Context, i int, since time.Time) (bool, string) {
				p, ok := s.fleet(ctx)[s.c.NodeNames()[i]]
				return ok && reconnected(since)(nil, p.st), fmt.Sprint(p.st)
			},
			exited: s.c.AgentExited,
		},
		kindControlPlane: {
			targets: len(s.c.ControlPlaneTargets()),
			name:    controlPlaneTarget,
			kill:    s.c.KillControlPlane,
			// A replica is ready only once it has listed the API: it
			// is started again only while kube-apiserver is up, so its
			// downtime includes the rest of an outage.
			hold: func() func() {
				s.apiGate.RLock()
				return s.apiGate.RUnlock
			},
			restart: s.c.RestartControlPlane,
			recovered: func(ctx context.Context, i int, _ time.Time) (bool, string) {
				code, _, err := s.c.ControlPlaneReadyz(ctx, i)
				if err != nil || code != 200 {
					return false, fmt.Sprintf("cp-%d /readyz %d %v", i, code, err)
				}
				return s.fleetSettled(ctx, true)
			},
			exited: s.c.ControlPlaneExited,
		},
		kindAPIServer: {
			targets: 1,
			name:    func(int) string { return kindAPIServer },
			kill: func(int) error {
				s.apiGate.Lock() // released by restart
				if err := s.c.API.KillAPIServer(); err != nil {
					s.apiGate.Unlock()
					return err
				}
				return nil
			},
			restart: func(ctx context.Context, _ int) error {
				defer s.apiGate.Unlock()
				return s.c.API.RestartAPIServer(ctx)
			},
			recovered: func(ctx context.Context, _ int, _ time.Time) (bool, string) {
				for i := range s.c.ControlPlaneTargets() {
					rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
					api, err := s.c.APIWatchAt(rctx, i)
					cancel()
					if err == nil && api.GetViewsMayBeStale() {
						return false, fmt.Sprintf("cp-%d: views may be stale: %v", i, api)
					}
				}
				return true, ""
			},
		},
	}
}

// faultLoop injects plan's faults until ctx ends; watch bounds the exit
// watchers of the processes it restarts.
func (s *soak) faultLoop(ctx, watch context.Context, plan faultPlan, ops faultOps, rng *rand.Rand) {
	for n := 0; plan.times == 0 || n < plan.times; n++ {
		if !sleepCtx(ctx, uniform(rng, plan.gap)) {
			return
		}
		i := rng.IntN(ops.targets)
		s.inject(ctx, watch, plan.kind, ops, i, uniform(rng, plan.down))
	}
}

// inject kills target i, keeps it down for down (less when ctx ends: the
// soak is over), restarts it and waits until it is back in service. The
// restart and the wait outlive ctx: a soak never ends with a process down.
func (s *soak) inject(ctx, watch context.Context, kind string, ops faultOps, i int, down time.Duration) {
	target := ops.name(i)
	rec := faultRecord{Kind: kind, Target: target}
	moved := s.connectedTo(ctx, kind, i)
	s.mu.Lock()
	s.down[target] = true
	if ops.exited != nil {
		select {
		case <-ops.exited(i): // died on its own: its watcher says so; restart it all the same
		default:
			s.killed[ops.exited(i)] = true
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.down, target)
		rec.Seq = len(s.faults) + 1
		s.faults = append(s.faults, rec)
	}()

	if err := ops.kill(i); err != nil {
		rec.Error = fmt.Sprintf("kill: %v", err)
		s.violate("kill %s: %v", target, err)
		return
	}
	// After the kill returned (the process reaped): the API server's kill
	// first waits for the writes and replica restarts in flight.
	killedAt := time.Now()
	rec.KilledAt = msDuration(s.since(killedAt))
	s.log.Info("soak: fault", "target", target, "at", s.since(killedAt), "down", down.Round(time.Millisecond))
	if kind == kindControlPlane && moved > 0 {
		rec.Moved = moved
		rec.Failover = s.failover(ctx, killedAt, down)
	}
	sleepCtx(ctx, time.Until(killedAt.Add(down)))

	life := context.WithoutCancel(ctx)
	rctx, cancel := context.WithTimeout(life, restartBound)
	defer cancel()
	release := func() {}
	if ops.hold != nil {
		release = ops.hold()
	}
	restartedAt := time.Now()
	rec.RestartedAt, rec.Down = msDuration(s.since(restartedAt)), msDuration(restartedAt.Sub(killedAt))
	err := ops.restart(rctx, i)
	release()
	if err != nil {
		rec.Error = fmt.Sprintf("restart: %v", err)
		s.violate("%s did not come back: %v", target, err)
		return
	}
	rec.RestartTook = msDuration(time.Since(restartedAt))
	if ops.exited != nil {
		s.watchExit(watch, target, ops.exited(i))
	}
	err = pollEvery(life, recoveryBound, 50*time.Millisecond, func() (bool, string) { return ops.recovered(life, i, restartedAt) })
	rec.Recovery = msDuration(time.Since(restartedAt))
	if err != nil {
		rec.Error = fmt.Sprintf("recovery: %v", err)
		s.violate("%s not back in service %v after its restart: %v", target, recoveryBound, err)
		return
	}
	rec.Recovered = true
	s.log.Info("soak: recovered", "target", target, "down", time.Duration(rec.Down).Round(time.Millisecond),
		"restart", time.Duration(rec.RestartTook).Round(time.Millisecond), "recovery", time.Duration(rec.Recovery).Round(time.Millisecond))
}

// connectedTo counts the agents connected to replica i before it is
// killed: the ones that must fail over.
func (s *soak) connectedTo(ctx context.Context, kind string, i int) int {
	if kind != kindControlPlane {
		return 0
	}
	n := 0
	for _, p := range s.fleet(ctx) {
		if p.replica == i {
			n++
		}
	}
	return n
}

// failover waits, for at most the replica's planned downtime, until every
// agent acked on a live replica, and returns how long that took from the
// kill; nil when the replica came back first.
func (s *soak) failover(ctx context.Context, killedAt time.Time, down time.Duration) *msDuration {
	err := pollEvery(ctx, time.Until(killedAt.Add(down)), 50*time.Millisecond, func() (bool, string) {
		return s.fleetSettled(ctx, true)
	})
	if err != nil {
		return nil
	}
	d := msDuration(time.Since(killedAt))
	return &d
}

// finalChecks: after the last fault every process is running, every
// replica ready, the API server answers, every agent acked on a live
// replica, and traffic from every source reaches exactly the echo
// Service's endpoints.
func (s *soak) finalChecks(ctx context.Context) {
	if err := pollEvery(ctx, finalBound, 100*time.Millisecond, func() (bool, string) {
		return s.fleetSettled(ctx, false)
	}); err != nil {
		s.violate("the cluster did not settle %v after the last fault: %v", finalBound, err)
	}
	for i := range s.c.NodeNames() {
		select {
		case <-s.c.AgentExited(i):
			s.violate("%s is not running at the end", agentTarget(s.c, i))
		default:
		}
	}
	for i := range s.c.ControlPlaneTargets() {
		rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		code, body, err := s.c.ControlPlaneReadyz(rctx, i)
		cancel()
		if err != nil || code != 200 {
			s.violate("cp-%d is not ready at the end: %d %q %v", i, code, body, err)
		}
	}
	if _, err := s.c.API.Client().CoreV1().Namespaces().Get(ctx, system.Namespace, metav1.GetOptions{}); err != nil {
		s.violate("kube-apiserver does not answer at the end: %v", err)
	}
	s.mu.Lock()
	want := s.scaled
	s.mu.Unlock()
	for _, src := range sources(s.c) {
		if err := pollEvery(ctx, finalBound, 100*time.Millisecond, func() (bool, string) {
			res, err := s.e.tcp(ctx, src.ns, s.c.VIP(), 24)
			return err == nil && answeredBy(res, want...), fmt.Sprint(res, err)
		}); err != nil {
			s.violate("%s does not reach exactly %v at the end: %v", src.name, want, err)
		}
	}
}

// uniform draws a duration from r, both ends included.
func uniform(rng *rand.Rand, r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])+1))
}

// sleepCtx waits d; false when ctx ended first. (Since Go 1.23 an
// unfired time.After timer is collected without Stop.)
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
