package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	// settingsConfigMap is the control plane's settings ConfigMap in
	// deploy/ (--config-map), key config.yaml.
	settingsConfigMap = "switchyard-controlplane"
	// progressAnnotation is where the replicas record a rollout's step.
	progressAnnotation = "switchyard.io/rollout-progress"
	// rolloutPollEvery is how often the phase looks at every replica.
	rolloutPollEvery = 300 * time.Millisecond
)

const (
	modeNftables = switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
	modeIptables = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
)

// fleetState is one look at every replica: the rollout each drives, the
// cluster settings hash each sends, and every node as the replica its
// agent streams from sees it.
type fleetState struct {
	rollout  []*switchyardv1.GetRolloutResponse // per replica; nil when it did not answer
	settings []string                           // ListNodesResponse.settings.hash per replica
	nodes    map[string]*switchyardv1.NodeStatus
	served   map[string]int // node → the replica its agent is connected to
	err      error
}

func (b *opsBed) fleet(ctx context.Context) fleetState {
	f := fleetState{rollout: make([]*switchyardv1.GetRolloutResponse, len(b.admin)), settings: make([]string, len(b.admin)),
		nodes: map[string]*switchyardv1.NodeStatus{}, served: map[string]int{}}
	for i, conn := range b.admin {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		admin := switchyardv1.NewAdminServiceClient(conn)
		r, err := admin.GetRollout(cctx, &switchyardv1.GetRolloutRequest{})
		if err != nil {
			f.err = errors.Join(f.err, fmt.Errorf("GetRollout on the replica on %s: %w", cluster.NodeName(i), err))
		} else {
			f.rollout[i] = r
		}
		l, err := admin.ListNodes(cctx, &switchyardv1.ListNodesRequest{})
		cancel()
		if err != nil {
			f.err = errors.Join(f.err, fmt.Errorf("ListNodes on the replica on %s: %w", cluster.NodeName(i), err))
			continue
		}
		f.settings[i] = l.GetSettings().GetHash()
		for _, n := range l.GetNodes() {
			if n.GetConnected() {
				f.nodes[n.GetName()], f.served[n.GetName()] = n, i
			}
		}
	}
	return f
}

func (f fleetState) mode(node string) switchyardv1.DataplaneMode {
	return f.nodes[node].GetAgent().GetMode()
}

// runs says whether node's agent programs the settings of hash.
func (f fleetState) runs(node, hash string) bool {
	return hash != "" && f.nodes[node].GetSettingsHash() == hash
}

// every says whether every replica answered GetRollout and pred holds
// for each answer.
func (f fleetState) every(pred func(*switchyardv1.GetRolloutResponse) bool) bool {
	for _, r := range f.rollout {
		if r == nil || !pred(r) {
			return false
		}
	}
	return true
}

// of is the rollout as the replica serving node drives it (nil when no
// replica serves it).
func (f fleetState) of(node string) *switchyardv1.GetRolloutResponse {
	i, ok := f.served[node]
	if !ok {
		return nil
	}
	return f.rollout[i]
}

func (f fleetState) String() string {
	var b strings.Builder
	for i, r := range f.rollout {
		fmt.Fprintf(&b, "[replica on %s: %s] ", cluster.NodeName(i), r.GetSummary())
	}
	for i := range len(f.rollout) {
		n := cluster.NodeName(i)
		st := f.nodes[n]
		fmt.Fprintf(&b, "[%s: %s settings %s (%s), desired %s] ", n, st.GetAgent().GetMode(), short(st.GetSettingsHash()),
			st.GetSettingsSource(), short(st.GetDesiredSettingsHash()))
	}
	if f.err != nil {
		fmt.Fprintf(&b, "errors: %v", f.err)
	}
	return b.String()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// echoStream is new connections to the echo ClusterIP from one place,
// a few a second, until stopped.
type echoStream struct {
	from  string
	began time.Time
	done  chan struct{}
	res   probe.Result
	err   error
}

const echoStreamRate = 10

// startEchoStreams starts an echoStream from each place; stop ends them
// all, and so does the end of the test, which waits for them.
func startEchoStreams(t *testing.T, b *opsBed) (streams []*echoStream, stop context.CancelFunc) {
	ctx, stop := context.WithCancel(t.Context())
	t.Cleanup(func() {
		stop()
		for _, s := range streams {
			<-s.done
		}
	})
	from := []struct {
		what string
		p    *probe.Prober
	}{
		{"client pod (node-0's rules)", b.pod},
		{"node-1 (its own rules)", probe.New(b.c.Topology(), b.c.NodeNS(1))},
	}
	for _, f := range from {
		s := &echoStream{from: f.what, began: time.Now(), done: make(chan struct{})}
		go func() {
			defer close(s.done)
			s.res, s.err = f.p.Stream(ctx, b.vip, probe.StreamOptions{Rate: echoStreamRate, Timeout: 2 * time.Second})
		}()
		streams = append(streams, s)
	}
	return streams, stop
}

// checkEchoStreams waits for streams stopped by their context and fails
// t on any failed connection, logging each with its wall-clock offset
// from since.
func checkEchoStreams(t *testing.T, what string, since time.Time, streams []*echoStream) {
	t.Helper()
	for _, s := range streams {
		<-s.done
		if s.err != nil {
			t.Errorf("%s: stream from %s: %v", what, s.from, s.err)
			continue
		}
		t.Logf("%s: echo ClusterIP from %s: %d connections, %d failed, %d skipped, %v: %s", what, s.from,
			s.res.Attempts, len(s.res.Failures), s.res.Skipped, s.res.Elapsed.Round(time.Millisecond), s.res)
		for _, f := range s.res.Failures {
			t.Logf("  failed at %v after the ConfigMap change: %s", s.began.Add(f.At).Sub(since).Round(time.Millisecond), f)
		}
		if len(s.res.Failures) > 0 || s.res.Attempts < echoStreamRate*int(s.res.Elapsed/time.Second)/2 {
			t.Errorf("%s: from %s, want every connection answered (and at least half the %d/s made): %d of %d failed: %s",
				what, s.from, echoStreamRate, len(s.res.Failures), s.res.Attempts, firstFailures(s.res))
		}
	}
}

// rolloutSettings rolls a mode change out through the settings ConfigMap
// as the README tells operators: the rollout block added to config.yaml,
// iptables to nftables on node-0 (the canary, the client pod's node)
// first, then 50 %, then every node, with new connections to the echo
// ClusterIP from the client pod and from node-1 throughout, none
// failing. Both replicas drive it (each gates on the agents connected to
// it; they agree on the step through the ConfigMap's annotation). A
// second rollout halts at its canary step when a foreign DROP (an nft
// table at priority raw in front of the agent's rules) breaks node-0's
// datapath probe: every replica says halted, why, and stays halted past
// its pause; node-1 keeps the cluster's settings.
func rolloutSettings(t *testing.T, b *opsBed) {
	ctx, c := t.Context(), b.c
	cs, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	ns := c.SwitchyardNS()
	cmap, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, settingsConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := cmap.Data["config.yaml"]
	for line := range strings.Lines(orig) {
		if strings.HasPrefix(line, "rollout:") || strings.HasPrefix(line, "mode:") {
			t.Fatalf("the settings ConfigMap already sets %q:\n%s", strings.TrimSpace(line), orig)
		}
	}
	if orig != "" && !strings.HasSuffix(orig, "\n") {
		orig += "\n"
	}
	canary, other := cluster.NodeName(0), cluster.NodeName(1)
	const pause = 3 * time.Second

	before := b.fleet(ctx)
	if before.err != nil {
		t.Fatal(before.err)
	}
	for _, n := range []string{canary, other} {
		st, ok := before.nodes[n]
		if !ok || before.mode(n) != modeIptables {
			t.Fatalf("before the rollout, want %s connected and running iptables: %v", n, before)
		}
		t.Logf("before: %s served by the replica on %s, mode %s, settings %s (%s); that replica sends the cluster's %s",
			n, cluster.NodeName(before.served[n]), st.GetAgent().GetMode(), short(st.GetSettingsHash()), st.GetSettingsSource(),
			short(before.settings[before.served[n]]))
	}
	for i, r := range before.rollout {
		t.Logf("before: replica on %s: %s", cluster.NodeName(i), r.GetSummary())
	}

	streams, stopTraffic := startEchoStreams(t, b)
	time.Sleep(time.Second) // traffic before the change
	start := putSettings(ctx, t, cs, ns, orig+fmt.Sprintf(`rollout:
  name: to-nftables
  settings: {mode: nftables}
  canaryNodes: [%s]
  steps: ["50%%"]
  pause: %v
`, canary, pause))

	var (
		since       = func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
		target      string
		logged      = map[string]bool{}
		annotation  string
		canaryAt    time.Duration // the canary's agent programs the target settings, in nftables
		reachedAt   time.Duration // node-1 given the target settings (settings_source rollout)
		otherAt     time.Duration // node-1's agent programs them, in nftables
		canaryFirst = true
	)
	pollUntil(t, "the rollout to-nftables completes on every replica", 3*time.Minute, rolloutPollEvery, func() (bool, string) {
		f := b.fleet(ctx)
		for i, r := range f.rollout {
			if r.GetName() != "to-nftables" {
				continue
			}
			if target == "" {
				target = r.GetTargetSettingsHash()
				var steps []string
				for _, s := range r.GetSteps() {
					steps = append(steps, fmt.Sprintf("%s:%d", s.GetName(), s.GetNodes()))
				}
				t.Logf("%v: the rollout's steps (nodes reached): %v; settings %s → %s", since(), steps,
					short(r.GetBaseSettingsHash()), short(target))
			}
			if key := fmt.Sprint(i, r.GetStep(), r.GetState(), r.GetAppliedNodes()); !logged[key] {
				logged[key] = true
				t.Logf("%v: replica on %s: %s", since(), cluster.NodeName(i), r.GetSummary())
			}
			if r.GetState() == "halted" {
				t.Fatalf("%v: rollout halted: %v", since(), f)
			}
		}
		if cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, settingsConfigMap, metav1.GetOptions{}); err == nil &&
			cm.Annotations[progressAnnotation] != annotation {
			annotation = cm.Annotations[progressAnnotation]
			t.Logf("%v: %s: %s", since(), progressAnnotation, annotation)
		}
		if canaryAt == 0 && f.mode(canary) == modeNftables && f.runs(canary, target) {
			canaryAt = since()
			t.Logf("%v: %s (canary) runs nftables with the target settings", canaryAt, canary)
		}
		if reachedAt == 0 && f.nodes[other].GetSettingsSource() == "rollout" {
			reachedAt = since()
			t.Logf("%v: %s reached (its replica: %s)", reachedAt, other, f.of(other).GetSummary())
			if canaryAt == 0 {
				t.Errorf("%v: %s reached before %s, the canary, applied the target settings: %v", reachedAt, other, canary, f)
			}
		}
		if f.mode(other) == modeNftables {
			if otherAt == 0 {
				otherAt = since()
				t.Logf("%v: %s runs nftables", otherAt, other)
			}
			if canaryAt == 0 && canaryFirst {
				canaryFirst = false
				t.Errorf("%v: %s switched to nftables before the canary %s: %v", since(), other, canary, f)
			}
			if src := f.nodes[other].GetSettingsSource(); src != "rollout" {
				t.Errorf("%v: %s runs nftables while its replica says its settings come from %q: %v", since(), other, src, f)
			}
		}
		done := f.every(func(r *switchyardv1.GetRolloutResponse) bool {
			return r.GetName() == "to-nftables" && r.GetState() == "complete"
		}) &&
			f.runs(canary, target) && f.runs(other, target) && f.mode(canary) == modeNftables && f.mode(other) == modeNftables
		return done, f.String()
	})
	took := since()
	time.Sleep(time.Second) // and traffic after it
	stopTraffic()
	checkEchoStreams(t, "rollout to-nftables", start, streams)
	t.Logf("rollout iptables→nftables over 2 nodes (canary %s, 50%%, 100%%, pause %v): canary nftables %v after the ConfigMap change, %s reached %v (%v after the canary applied) and nftables %v, complete on both replicas %v",
		canary, pause, canaryAt, other, reachedAt, reachedAt-canaryAt, otherAt, took)
	if reachedAt-canaryAt < pause-time.Second {
		// By design each replica gates on its own agents: one that does
		// not serve the canary advances after the pause from when it saw
		// the step start, not from the canary's ACK.
		t.Logf("note: %s was reached only %v after the canary applied (pause %v): the replica not serving the canary advanced on its own clock",
			other, reachedAt-canaryAt, pause)
	}
	after := b.fleet(ctx)
	for _, n := range []string{canary, other} {
		st := after.nodes[n]
		t.Logf("after: %s served by the replica on %s: mode %s, settings %s (%s), datapath healthy=%t", n,
			cluster.NodeName(after.served[n]), st.GetAgent().GetMode(), short(st.GetSettingsHash()), st.GetSettingsSource(),
			st.GetDatapath().GetHealthy())
		if st.GetSettingsSource() != "rollout" || st.GetDesiredSettingsHash() != target {
			t.Errorf("after the rollout %s: settings source %q desired %s, want rollout's %s", n, st.GetSettingsSource(),
				short(st.GetDesiredSettingsHash()), short(target))
		}
	}
	for i := range c.Nodes() {
		pollUntil(t, cluster.NodeName(i)+" /healthz 200 with the canary healthy in nftables", 30*time.Second, 200*time.Millisecond, func() (bool, string) {
			h := b.healthz(ctx, i)
			return h.is(http.StatusOK, true), fmt.Sprint(h.code, " ", h.body)
		})
	}
	spread(t, b.pod, "client pod → echo ClusterIP after the rollout (nftables)", b.vip, 30, 3)

	rolloutHalts(t, b, cs, orig)
	logRolloutLines(t, b)
}

// rolloutHalts runs a second rollout (the first's mode now the cluster's,
// as the README says to finish one) whose canary's datapath probe fails:
// an nft table at priority raw on node-0 drops the datapath canary's
// address, in front of the agent's nftables rules.
func rolloutHalts(t *testing.T, b *opsBed, cs kubernetes.Interface, orig string) {
	ctx, c := t.Context(), b.c
	ns := c.SwitchyardNS()
	canary, other := cluster.NodeName(0), cluster.NodeName(1)
	const pause = 60 * time.Second
	vip := netip.MustParseAddrPort(canaryVIP)

	streams, stopTraffic := startEchoStreams(t, b)
	start := putSettings(ctx, t, cs, ns, orig+fmt.Sprintf(`mode: nftables
rollout:
  name: slower-resync
  settings: {syncPeriod: 30m}
  canaryNodes: [%s]
  pause: %v
`, canary, pause))
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	var f fleetState
	applied := pollUntil(t, "the canary applies slower-resync", 2*time.Minute, rolloutPollEvery, func() (bool, string) {
		f = b.fleet(ctx)
		r := f.of(canary)
		return f.every(func(r *switchyardv1.GetRolloutResponse) bool { return r.GetName() == "slower-resync" }) &&
			r.GetState() == "pausing" && r.GetAppliedNodes() == 1 && f.runs(canary, r.GetTargetSettingsHash()), f.String()
	})
	t.Logf("%v: %s (canary) applied slower-resync: %v", applied.Round(100*time.Millisecond), canary, f)

	table := "e2e-foreign-canary"
	for _, argv := range [][]string{{"nft", "add", "table", "ip", table},
		{"nft", "add", "chain", "ip", table, "out", "{", "type", "filter", "hook", "output", "priority", "raw", ";", "}"},
		{"nft", "add", "rule", "ip", table, "out", "ip", "daddr", vip.Addr().String(), "tcp", "dport", fmt.Sprint(vip.Port()), "drop"}} {
		b.nodeRun(t, 0, argv...)
	}
	dropped := true
	t.Cleanup(func() {
		if dropped {
			_, _ = c.NodeExec(context.WithoutCancel(ctx), 0, "nft", "delete", "table", "ip", table)
		}
	})
	halted := pollUntil(t, "every replica says slower-resync halted", time.Minute, rolloutPollEvery, func() (bool, string) {
		f = b.fleet(ctx)
		return f.every(func(r *switchyardv1.GetRolloutResponse) bool {
			return r.GetName() == "slower-resync" && r.GetState() == "halted"
		}), f.String()
	})
	t.Logf("halted %v after the foreign DROP on %s (%v after the ConfigMap change)", halted.Round(100*time.Millisecond),
		canary, since())
	for i, r := range f.rollout {
		t.Logf("replica on %s: %s", cluster.NodeName(i), r.GetSummary())
		if !strings.Contains(r.GetHaltReason(), canary) || !strings.Contains(r.GetHaltReason(), "datapath") {
			t.Errorf("replica on %s: halt reason %q, want %s's datapath", cluster.NodeName(i), r.GetHaltReason(), canary)
		}
		if r.GetStep() != 0 || r.GetReachedNodes() != 1 {
			t.Errorf("replica on %s: halted at step %d with %d nodes reached, want the canary step alone", cluster.NodeName(i),
				r.GetStep(), r.GetReachedNodes())
		}
	}
	if cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, settingsConfigMap, metav1.GetOptions{}); err == nil {
		t.Logf("%s: %s", progressAnnotation, cm.Annotations[progressAnnotation])
	}
	t.Logf("%s datapath as its replica has it: %v", canary, f.nodes[canary].GetDatapath())
	notReached := func(f fleetState) {
		t.Helper()
		st, base := f.nodes[other], f.settings[f.served[other]]
		if st.GetSettingsSource() != "cluster" || st.GetDesiredSettingsHash() != base || st.GetSettingsHash() != base {
			t.Errorf("%s, not reached: settings source %q, desired %s, programs %s; want the cluster's %s", other,
				st.GetSettingsSource(), short(st.GetDesiredSettingsHash()), short(st.GetSettingsHash()), short(base))
		}
		if f.mode(other) != modeNftables {
			t.Errorf("%s runs %s, want the cluster's nftables", other, f.mode(other))
		}
	}
	notReached(f)

	// A halted rollout does not move on, on either replica: look again
	// after more than a pause since the canary applied (the replica not
	// serving the canary has no ACK to wait for, only the halt recorded
	// in the ConfigMap).
	wait := time.Until(start.Add(applied + pause + 5*time.Second))
	t.Logf("waiting %v, past the pause (%v) since the canary applied", wait.Round(time.Second), pause)
	time.Sleep(wait)
	f = b.fleet(ctx)
	if !f.every(func(r *switchyardv1.GetRolloutResponse) bool {
		return r.GetName() == "slower-resync" && r.GetState() == "halted" && r.GetStep() == 0 && r.GetReachedNodes() == 1
	}) {
		t.Errorf("%v: after more than a pause, want every replica halted at the canary step: %v", since(), f)
	}
	notReached(f)

	b.nodeRun(t, 0, "nft", "delete", "table", "ip", table)
	dropped = false
	up := pollUntil(t, canary+" /healthz 200 again", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		h := b.healthz(ctx, 0)
		return h.is(http.StatusOK, true), fmt.Sprint(h.code, " ", h.body)
	})
	time.Sleep(2 * time.Second)
	f = b.fleet(ctx)
	t.Logf("DROP removed: %s /healthz 200 %v later; %v", canary, up.Round(100*time.Millisecond), f)
	if !f.every(func(r *switchyardv1.GetRolloutResponse) bool { return r.GetState() == "halted" }) {
		t.Errorf("a halted rollout went on once the canary recovered: %v", f)
	}
	stopTraffic()
	checkEchoStreams(t, "rollout slower-resync (halted)", start, streams)
}

// putSettings replaces config.yaml in the settings ConfigMap (a merge
// patch of data: the replicas' progress annotation stays) and returns
// when.
func putSettings(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, cfg string) time.Time {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"config.yaml": cfg}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, settingsConfigMap, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("config.yaml now:\n%s", cfg)
	return time.Now()
}

// logRolloutLines logs what the replicas logged about rollouts.
func logRolloutLines(t *testing.T, b *opsBed) {
	out, err := b.c.Kubectl(t.Context(), "-n", b.c.SwitchyardNS(), "logs", "-l", "app.kubernetes.io/name=switchyard-controlplane",
		"--prefix", "--tail=-1")
	if err != nil {
		t.Logf("control-plane logs: %v", err)
		return
	}
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "rollout") {
			t.Log(strings.TrimSpace(line))
		}
	}
}
