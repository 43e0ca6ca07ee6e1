package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// The older Switchyard the upgrade starts from: v0.1.0, the last commit
// before issue 34, resolved by hash so that the test needs no tags.
const (
	upgradeFrom = "7f1a4a043d40eaaa9b8b4c8878d85d2da271d70c"
	// upgradeFromTag is its images' tag, also stamped into its agent's
	// version (NodeStatus.agent.agent_version); this checkout's are
	// cluster.ImageTag.
	upgradeFromTag = "v0.1.0"
	upgradeNS      = "upgrade"
)

// TestRealClusterUpgrade upgrades Switchyard from v0.1.0 (upgradeFrom) to
// this checkout and downgrades it back, as an operator does, under the
// hand-over's traffic (handover_traffic_test.go): the older commit's
// deploy/ (through its own bed overlay, base: mTLS from the control
// plane's own CA) installed with images built from its sources, then this
// checkout's applied over it with kubectl apply, which rolls the
// DaemonSet and the Deployment (one pod at a time each, at the same
// time), then the older one applied again. Then both once more with the
// Deployment paused until the agents have rolled and acked: new agents
// with old replicas on the way up, old agents with new replicas on the
// way down, each pair checked on its own.
//
// What differs between the two (git diff 7f1a4a0 HEAD --stat -- proto
// deploy nodeagent/internal/persist):
//   - discovery.proto: responses carry change_triggers (field 6 of
//     DeltaSnapshotsResponse, 5 of StreamSnapshotsResponse, message
//     ChangeTriggers), which an old agent skips as unknown; and the new
//     control plane no longer sets ServiceView.last_change_trigger_time
//     (service_view.proto, now deprecated), so an old agent behind a new
//     replica reports no programming latency.
//   - admin.proto: NodeStatus.node_object and last_programming_latency_time.
//   - deploy/: the agent's liveness failureThreshold 6 (kubectl apply of
//     the older manifests takes it back to the default), comments; the
//     mtls overlay's CA rotationPolicy and the Dockerfiles' certfile
//     module, neither used here.
//   - nodeagent/internal/persist: nothing; both write state-file format 3,
//     and the agent's state directory (a hostPath) outlives its pod, so
//     each version restores the view the other persisted: checked from
//     every new agent's log.
//
// Beyond those files, the newer agent reloads the kubelet's rotating
// client certificate (read once by the older one) and can hand the node
// over with kube-proxy (cleanupKubeProxy, off in this install).
//
// After each roll (and in each held mixed state) every Switchyard pod
// must run the images built for its version (tag and image digest), every
// agent must have acked running its version, and nothing of the traffic
// may have failed: no new connection, no long-lived connection broken, no
// two UDP sends in a row unanswered, the UDP flow on the same pod
// throughout.
func TestRealClusterUpgrade(t *testing.T) {
	netns.RequireRoot(t)
	apiserver.Require(t)
	ctx := t.Context()
	logger := netns.TestLogger(t)
	co, err := cluster.AddCheckout(ctx, upgradeFrom, t.TempDir())
	if cluster.IsShallowHistory(err) {
		t.Skipf("a shallow clone: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := co.Remove(context.WithoutCancel(ctx)); err != nil {
			t.Error(err)
		}
	})
	begin := time.Now()
	oldArchives, err := co.BuildImages(ctx, cluster.Config{Logger: logger}, upgradeFromTag)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images of %s built (or cached) in %v", co.Commit[:12], time.Since(begin).Round(time.Millisecond))
	cur, err := cluster.ThisSource()
	if err != nil {
		t.Fatal(err)
	}
	// This checkout's two images as Start builds them (from the cache by
	// then), for their digests.
	binDir, err := apiserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	curArchives, err := images.Build(ctx, images.Options{RepoRoot: cur.Root, BinDir: binDir, Tag: cur.Tag,
		Only: []string{images.ControlPlane, images.Agent}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	old := release{name: upgradeFrom[:7], src: co.Source(upgradeFromTag), archives: oldArchives}
	now := release{name: "HEAD", src: cur, archives: curArchives}
	if v, ok := cluster.Versions(ctx)["switchyard"]; ok {
		now.name = v[:7]
	}
	t.Logf("between %s (%s) and this checkout %v", co.Commit, upgradeFromTag, cluster.Versions(ctx))
	for i := range old.archives {
		if old.archives[i].Digest == now.archives[i].Digest {
			t.Fatalf("%s is the same image in both versions (%s): nothing would be upgraded", old.archives[i].Name, old.archives[i].Digest)
		}
	}

	var paths []string
	for _, a := range oldArchives {
		paths = append(paths, a.Path)
	}
	c := cluster.Start(t, cluster.Config{Nodes: 2, Images: paths})
	begin = time.Now()
	if err := c.InstallSwitchyardFrom(ctx, old.src, cluster.OverlayBase, ""); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSwitchyard(ctx); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, old, old, stateFresh)
	t.Logf("%s installed and every agent acked in %v", old.name, time.Since(begin).Round(time.Millisecond))
	hold := startHold(t, c, upgradeNS)
	waitFor(t, "the ClusterIP programmed", time.Minute, func() (bool, error) {
		return dialFrom(hold.pod, netip.AddrPortFrom(hold.vip, holdNew)) == nil, nil
	})

	// Each step under its own traffic: first as one kubectl apply rolls
	// both at once; then with the Deployment held until the agents are
	// rolled and have acked, so that each mixed pair (new agents with old
	// replicas on the way up, old agents with new replicas on the way
	// down) is seen working on its own, not only for the seconds the
	// rolls overlap.
	for _, step := range []struct {
		from, to   release
		holdAgents bool
	}{{old, now, false}, {now, old, false}, {old, now, true}, {now, old, true}} {
		phase := step.from.name + " → " + step.to.name
		if step.holdAgents {
			phase += ", agents first"
		}
		traffic := hold.traffic(t)
		roll(t, c, step.from, step.to, phase, step.holdAgents)
		time.Sleep(3 * time.Second) // the traffic over the new pods alone
		traffic.check(t, phase, true)
		if t.Failed() {
			return
		}
	}
}

// release is one version of Switchyard on the bed.
type release struct {
	name     string // for the log: a short commit
	src      cluster.Source
	archives []images.Archive // its controlplane and agent images
}

// roll applies to over the running install of from and waits for both
// rollouts, every pod on to's images and every agent acked running to's.
// With holdAgents the Deployment is paused before the apply (kubectl
// apply leaves spec.paused alone) and resumed only once every agent runs
// to's and acked from's replicas.
func roll(t *testing.T, c *cluster.Cluster, from, to release, phase string, holdAgents bool) {
	t.Helper()
	ctx := t.Context()
	const ds, deploy = "daemonset/switchyard-agent", "deployment/switchyard-controlplane"
	if holdAgents {
		kubectl(t, c, "-n", cluster.SystemNS, "rollout", "pause", deploy)
	}
	begin := time.Now()
	since := func() time.Duration { return time.Since(begin).Round(time.Millisecond) }
	if err := c.InstallSwitchyardFrom(ctx, to.src, cluster.OverlayBase, ""); err != nil {
		t.Fatal(err)
	}
	var took []string
	kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", ds, "--timeout=5m")
	took = append(took, fmt.Sprintf("agents rolled out %v", since()))
	if holdAgents {
		// What WaitSwitchyard reads, without waiting for the Deployment.
		if err := c.ReadCABundle(ctx); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, c, to, from, stateRestored)
		took = append(took, fmt.Sprintf("%s agents acked %s replicas %v", to.name, from.name, since()))
		kubectl(t, c, "-n", cluster.SystemNS, "rollout", "resume", deploy)
	}
	kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", deploy, "--timeout=5m")
	took = append(took, fmt.Sprintf("replicas rolled out %v", since()))
	if err := c.WaitSwitchyard(ctx); err != nil {
		t.Fatal(err)
	}
	agentState := stateRestored
	if holdAgents {
		agentState = stateChecked // by the wait above
	}
	waitRunning(t, c, to, to, agentState)
	t.Logf("%s: applied %s; %s; every pod on %s's images and every agent acked %v after the apply",
		phase, begin.Format("15:04:05"), strings.Join(took, ", "), to.name, since())
}

// waitRunning waits until every agent pod runs agents' image and every
// control-plane pod cp's (the tag in its spec, the config digest of the
// archive as its status's imageID), and every agent acked running
// agents' version; then checks each agent's log for state.
func waitRunning(t *testing.T, c *cluster.Cluster, agents, cp release, state agentState) {
	t.Helper()
	ctx := t.Context()
	want, ids := map[string]images.Archive{}, map[string]string{}
	for _, r := range []struct {
		rel   release
		image string
	}{{agents, images.Agent}, {cp, images.ControlPlane}} {
		for _, a := range r.rel.archives {
			if a.Name != r.image {
				continue
			}
			id, err := a.ImageID()
			if err != nil {
				t.Fatal(err)
			}
			want[a.Name], ids[a.Name] = a, id
		}
	}
	var agentPods []string
	what := fmt.Sprintf("agents on %s's image, replicas on %s's", agents.name, cp.name)
	podsTook := waitFor(t, what, 2*time.Minute, func() (bool, error) {
		out, err := c.Kubectl(ctx, "-n", cluster.SystemNS, "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.app\.kubernetes\.io/name} {.metadata.deletionTimestamp}`+
				`{range .status.containerStatuses[*]} {.image} {.imageID}{end}{"\n"}{end}`)
		if err != nil {
			return false, err
		}
		agentPods = nil
		counts := map[string]int{}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			// name, app, image, imageID: anything else is a pod still
			// terminating (a deletion timestamp) or not started.
			if len(f) != 4 {
				return false, fmt.Errorf("pod not settled: %q", strings.TrimSpace(line))
			}
			name, short := f[0], strings.TrimPrefix(f[1], "switchyard-")
			a, ok := want[short]
			if !ok {
				return false, fmt.Errorf("pod %s of an unknown app %s", name, f[1])
			}
			if f[2] != a.Ref || f[3] != ids[short] {
				return false, fmt.Errorf("pod %s runs %s (%s), want %s (%s)", name, f[2], f[3], a.Ref, ids[short])
			}
			counts[short]++
			if short == images.Agent {
				agentPods = append(agentPods, name)
			}
		}
		if counts[images.Agent] != c.Nodes() || counts[images.ControlPlane] != 2 {
			return false, fmt.Errorf("%s: %v, want %d agents and 2 replicas", what, counts, c.Nodes())
		}
		return true, nil
	})
	begin := time.Now()
	settle, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if nodes, err := c.WaitSettled(settle); err != nil {
		t.Fatalf("%v; connected agents: %v", err, nodes)
	}
	// Settled counts an agent acked by any replica: every connected agent
	// must be agents' (an older stream a replica has not closed yet would
	// show).
	versionsTook := waitFor(t, "every agent acked running "+agents.name, time.Minute, func() (bool, error) {
		ok, nodes, err := c.Settled(ctx)
		if err != nil || !ok {
			return false, fmt.Errorf("not settled (err %v)", err)
		}
		for _, n := range nodes {
			if v := n.GetAgent().GetAgentVersion(); v != agents.src.Tag {
				return false, fmt.Errorf("%s's agent reports version %q, want %q", n.GetName(), v, agents.src.Tag)
			}
		}
		return true, nil
	})
	t.Logf("%s: pods on their images %v after the rollouts, every agent acked %v later (%v of it for the versions)",
		what, podsTook.Round(time.Millisecond), time.Since(begin).Round(time.Millisecond), versionsTook.Round(time.Millisecond))
	for _, p := range agentPods {
		log := kubectl(t, c, "-n", cluster.SystemNS, "logs", p)
		rejected, restored := strings.Contains(log, "state file rejected"), strings.Contains(log, "restored persisted view")
		switch {
		case rejected:
			t.Errorf("%s (%s) rejected the state file it found:\n%s", p, agents.name, firstLines(log, 20))
		case state == stateRestored && !restored:
			t.Errorf("%s (%s) did not restore its predecessor's state file:\n%s", p, agents.name, firstLines(log, 20))
		case state == stateFresh && restored:
			// The check above would pass on anything.
			t.Errorf("%s (%s) restored a state file on a fresh node:\n%s", p, agents.name, firstLines(log, 20))
		}
	}
}

// agentState is what an agent's log must say of its state directory.
type agentState int

const (
	stateFresh    agentState = iota // a first install: nothing to restore
	stateRestored                   // the view its predecessor (the other version) persisted restored
	stateChecked                    // checked already; only a rejection fails
)

// firstLines is s cut after n lines.
func firstLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…\n")
	}
	return strings.Join(lines, "")
}
