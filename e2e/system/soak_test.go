package system_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The soak (`make soak`) is not part of `make test`: TestSoak skips unless
// SWITCHYARD_SOAK is set. Its knobs come from the environment because the
// Makefile runs it through `go test`.
const (
	envSoak         = "SWITCHYARD_SOAK"
	envSoakDuration = "SOAK_DURATION" // default 10m
	envSoakSeed     = "SOAK_SEED"     // default: from the clock; printed
	envSoakOut      = "SOAK_OUT"      // directory for soak.json and soak.md
	envSoakRate     = "SOAK_RATE"     // new connections a second, all sources together (default 100)
)

// Bounds of the invariants: generous on purpose (a 2-core machine running
// everything), so that breaking one means something is stuck, not slow.
const (
	restartBound  = 90 * time.Second // a kill -9'd process is running and ready again
	recoveryBound = 2 * time.Minute  // a restarted process is back in service
	convergeBound = 2 * time.Minute  // an API change reached every node
	finalBound    = 2 * time.Minute  // after the last fault, everything settles
	rpcTimeout    = time.Second      // one AdminService call
	attemptTimout = 2 * time.Second  // one connection of the stream, as TestRestarts
)

// soakConfig is what TestSoak reads from the environment.
type soakConfig struct {
	plans    []faultPlan
	duration time.Duration
	seed     uint64
	rate     int
	out      string
}

func soakConfigFromEnv() (soakConfig, error) {
	cfg := soakConfig{plans: soakPlans, duration: 10 * time.Minute, seed: uint64(time.Now().UnixNano()), rate: 100,
		out: filepath.Join(os.TempDir(), "switchyard-soak")}
	var err error
	if v := os.Getenv(envSoakDuration); v != "" {
		if cfg.duration, err = time.ParseDuration(v); err != nil {
			return cfg, fmt.Errorf("%s: %w", envSoakDuration, err)
		}
	}
	if v := os.Getenv(envSoakSeed); v != "" {
		if cfg.seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return cfg, fmt.Errorf("%s: %w", envSoakSeed, err)
		}
	}
	if v := os.Getenv(envSoakRate); v != "" {
		if cfg.rate, err = strconv.Atoi(v); err != nil || cfg.rate < 1 {
			return cfg, fmt.Errorf("%s=%q: want a positive whole number (%v)", envSoakRate, v, err)
		}
	}
	if v := os.Getenv(envSoakOut); v != "" {
		cfg.out = v
	}
	return cfg, nil
}

// soak is one run: the cluster, what was injected and measured, and what
// broke.
type soak struct {
	c     *system.Cluster
	e     *env
	log   *slog.Logger
	cfg   soakConfig
	start time.Time
	// apiGate: API writes hold it shared, a kube-apiserver outage
	// exclusively. No write is in flight when kube-apiserver dies, none is
	// tried while it is down, and a control-plane restart (a replica is
	// ready only once it has listed the API) waits out an outage.
	apiGate sync.RWMutex
	// watchers are the goroutines that wait on process exits.
	watchers sync.WaitGroup

	mu      sync.Mutex
	faults  []faultRecord
	changes []changeRecord
	broken  []string
	down    map[string]bool          // targets between kill and recovery
	killed  map[<-chan struct{}]bool // processes the soak killed on purpose
	scaled  []string                 // pods the echo Service has now
}

// TestSoak injects faults at random (seeded) for SOAK_DURATION under a
// stream of connections and a stream of API changes, then writes soak.json
// and soak.md to SOAK_OUT. Failed connections are reported, not asserted;
// the test fails only when an invariant breaks: a process does not come
// back or exits on its own, a restarted one does not return to service, a
// change does not reach every node, or the cluster does not settle after
// the last fault (each within a generous bound).
func TestSoak(t *testing.T) {
	if os.Getenv(envSoak) == "" {
		t.Skipf("soak: set %s=1 (make soak) to run it", envSoak)
	}
	cfg, err := soakConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	// startCluster skips without the API server; a soak asked for must not.
	if err := apiserver.Available(); err != nil {
		t.Fatalf("soak needs the test bed: %v", err)
	}
	runSoak(t, cfg)
}

// smokePlans inject one fault of each kind, one after the other, in
// smokeDuration.
var smokePlans = []faultPlan{
	{kind: kindAgent, gap: [2]time.Duration{2 * time.Second, 3 * time.Second}, down: [2]time.Duration{time.Second, 2 * time.Second}, times: 1},
	{kind: kindControlPlane, gap: [2]time.Duration{5 * time.Second, 6 * time.Second}, down: [2]time.Duration{2 * time.Second, 3 * time.Second}, times: 1},
	{kind: kindAPIServer, gap: [2]time.Duration{9 * time.Second, 10 * time.Second}, down: [2]time.Duration{4 * time.Second, 5 * time.Second}, times: 1},
}

const smokeDuration = 18 * time.Second

// TestSoakSmoke is the soak in brief, in the normal suite (~30 s): one
// fault of each kind under the same traffic and changes, so that the soak
// itself keeps working. Its invariants are the soak's.
func TestSoakSmoke(t *testing.T) {
	cfg := soakConfig{plans: smokePlans, duration: smokeDuration, seed: uint64(time.Now().UnixNano()), rate: 100, out: t.TempDir()}
	rep := runSoak(t, cfg)
	for _, f := range rep.FaultsByKind {
		if f.Injected != 1 || f.Recovered != 1 {
			t.Errorf("%s: %d injected, %d recovered; want one fault, recovered", f.Kind, f.Injected, f.Recovered)
		}
	}
	if rep.Traffic.Attempted < cfg.rate*int(cfg.duration/time.Second)/2 {
		t.Errorf("only %d connections attempted in %v at %d/s", rep.Traffic.Attempted, cfg.duration, cfg.rate)
	}
	if rep.Convergence[0].Written == 0 {
		t.Error("no API change was written")
	}
}

// runSoak starts the soak's cluster (three nodes, four pods, two
// replicas), runs cfg, writes the report and the processes' logs to
// cfg.out, and fails t for every broken invariant.
func runSoak(t *testing.T, cfg soakConfig) *soakReport {
	t.Logf("soak seed=%d duration=%v rate=%d/s out=%s (%s=%d repeats the schedule)",
		cfg.seed, cfg.duration, cfg.rate, cfg.out, envSoakSeed, cfg.seed)
	c := startCluster(t, system.Config{Nodes: 3, Pods: 4, ControlPlanes: 2})
	s := &soak{c: c, e: &env{c: c}, log: netns.TestLogger(t), cfg: cfg,
		down: map[string]bool{}, killed: map[<-chan struct{}]bool{}, scaled: names(c.Topo.Pods()...)}
	rep, err := s.run(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.write(cfg.out); err != nil {
		t.Fatal(err)
	}
	if err := s.saveLogs(filepath.Join(cfg.out, "logs")); err != nil {
		t.Error(err)
	}
	t.Logf("soak report: %s and %s (process logs in %s)\n%s", filepath.Join(cfg.out, "soak.json"),
		filepath.Join(cfg.out, "soak.md"), filepath.Join(cfg.out, "logs"), rep.markdown())
	for _, b := range rep.Violations {
		t.Errorf("invariant broken: %s", b)
	}
	return rep
}

// run is the soak proper: traffic, API changes and one fault loop per
// kind until the duration ends, then the final checks; traffic runs
// until those are done, so every recovery happens under it.
func (s *soak) run(ctx context.Context) (*soakReport, error) {
	ops := s.faultOps()
	for _, plan := range s.cfg.plans {
		if _, ok := ops[plan.kind]; !ok {
			return nil, fmt.Errorf("soak plan: no operations for fault kind %q", plan.kind)
		}
	}
	if err := s.createSoakNamespace(ctx); err != nil {
		return nil, err
	}
	watch, stopWatching := context.WithCancel(ctx)
	defer func() { stopWatching(); s.watchers.Wait() }() // before Close stops every process
	for i := range s.c.NodeNames() {
		s.watchExit(watch, agentTarget(s.c, i), s.c.AgentExited(i))
	}
	for i := range s.c.ControlPlaneTargets() {
		s.watchExit(watch, controlPlaneTarget(i), s.c.ControlPlaneExited(i))
	}

	trafficCtx, stopTraffic := context.WithCancel(ctx)
	defer stopTraffic()
	traffic := make(chan []streamResult, 1)
	s.start = time.Now()
	go func() { traffic <- s.traffic(trafficCtx) }()

	loops, cancel := context.WithTimeout(ctx, s.cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for k, plan := range s.cfg.plans {
		rng := rand.New(rand.NewPCG(s.cfg.seed, uint64(k)))
		wg.Go(func() { s.faultLoop(loops, watch, plan, ops[plan.kind], rng) })
	}
	ch := &changer{s: s, rng: rand.New(rand.NewPCG(s.cfg.seed, uint64(len(s.cfg.plans))))}
	wg.Go(func() { ch.loop(loops) })
	wg.Wait()
	s.log.Info("soak: duration over, final checks", "elapsed", s.since(time.Now()))
	s.finalChecks(ctx)
	stopTraffic()
	streams := <-traffic
	return s.report(streams), nil
}

// since is t's offset from the start of the soak.
func (s *soak) since(t time.Time) time.Duration { return t.Sub(s.start).Round(time.Millisecond) }

// violate records a broken invariant.
func (s *soak) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.log.Error("soak: invariant broken", "what", msg)
	s.mu.Lock()
	s.broken = append(s.broken, msg)
	s.mu.Unlock()
}

// watchExit records a broken invariant when the process behind done exits
// without the soak having killed it.
func (s *soak) watchExit(ctx context.Context, target string, done <-chan struct{}) {
	s.watchers.Go(func() {
		select {
		case <-ctx.Done():
			return
		case <-done:
		}
		s.mu.Lock()
		killed := s.killed[done]
		s.mu.Unlock()
		if !killed {
			s.violate("%s exited without being killed (see its log)", target)
		}
	})
}

// placed is one node's status on the replica its agent is connected to.
type placed struct {
	replica int
	st      *switchyardv1.NodeStatus
}

// fleet returns, for each node whose agent is connected to a replica that
// answers, that replica's status of it (the newest stream, should two
// replicas both claim it for a moment).
func (s *soak) fleet(ctx context.Context) map[string]placed {
	out := map[string]placed{}
	for i := range s.c.ControlPlaneTargets() {
		rctx, cancel := context.WithTimeout(ctx, rpcTimeout)
		list, err := s.c.ListNodesAt(rctx, i)
		cancel()
		if err != nil {
			continue // a replica that is down
		}
		for _, n := range list {
			if !n.GetConnected() {
				continue
			}
			if p, ok := out[n.GetName()]; ok && !n.GetConnectedSince().AsTime().After(p.st.GetConnectedSince().AsTime()) {
				continue
			}
			out[n.GetName()] = placed{replica: i, st: n}
		}
	}
	return out
}

// fleetSettled says whether every node, except those whose agent is down
// on purpose when skipDown is set, is connected to a live replica and has
// acknowledged the version it wants.
func (s *soak) fleetSettled(ctx context.Context, skipDown bool) (bool, string) {
	f := s.fleet(ctx)
	for i, name := range s.c.NodeNames() {
		if skipDown && s.isDown(agentTarget(s.c, i)) {
			continue
		}
		p, ok := f[name]
		if !ok {
			return false, name + " is connected to no live replica"
		}
		if p.st.GetDesiredVersion() == "" || p.st.GetAckedVersion() != p.st.GetDesiredVersion() {
			return false, fmt.Sprintf("%s on replica %d: acked %q, desired %q", name, p.replica,
				short(p.st.GetAckedVersion()), short(p.st.GetDesiredVersion()))
		}
	}
	return true, ""
}

func (s *soak) isDown(target string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down[target]
}

// saveLogs copies every replica's and agent's output (over its restarts)
// into dir, the evidence behind a failure window or a broken invariant;
// the cluster's own directory goes with Close.
func (s *soak) saveLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("soak logs: %w", err)
	}
	logs := map[string]string{}
	for i := range s.c.ControlPlaneTargets() {
		logs[fmt.Sprintf("cp-%d.log", i)] = s.c.ControlPlaneLogsAt(i)
	}
	for i, name := range s.c.NodeNames() {
		logs["agent-"+name+".log"] = s.c.AgentLogs(i)
	}
	for name, text := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("soak logs: %w", err)
		}
	}
	return nil
}

// commit names the checked-out commit, "-dirty" when the tree differs.
func commit() string {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		rev += "-dirty"
	}
	return rev
}
