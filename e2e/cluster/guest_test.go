package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// What e2e/dataplane/ipvs's TestClusterBedInGuest passes to the guest
// (SWITCHYARD_QEMU_ENV); the names are repeated there.
const (
	// guestEnv is set to "1" by the guest's /init (hack/qemu-kernel.sh).
	guestEnv = "SWITCHYARD_QEMU_GUEST"
	// guestImagesEnv is a directory of OCI archives built on the host:
	// the guest has no mmdebstrap, no network and no Go toolchain.
	guestImagesEnv = "SWITCHYARD_GUEST_IMAGES"
	// guestRepoEnv is a directory with what the bed reads of the
	// checkout: go.work, hack/versions.env, deploy/, e2e/cluster/overlays/.
	guestRepoEnv = "SWITCHYARD_GUEST_REPO"
	// guestNodesEnv is the number of kubelet nodes (default 1).
	guestNodesEnv = "SWITCHYARD_GUEST_CLUSTER_NODES"
)

// TestBedInGuest brings the real-cluster bed up inside the QEMU guest,
// whose kernel has IPVS, and installs Switchyard in the ipvs mode; it runs
// only there (e2e/dataplane/ipvs's TestClusterBedInGuest boots it). It
// logs a "GUEST-PHASE" line with the guest's uptime at every step reached,
// so that a run cut short by the watchdog still says how far it got.
func TestBedInGuest(t *testing.T) {
	if os.Getenv(guestEnv) != "1" {
		t.Skipf("runs only inside the QEMU guest (%s=1): make ipvs-cluster boots it", guestEnv)
	}
	ph := &phases{logf: t.Logf}
	ph.reach("test started")
	defer func() { t.Logf("phases reached:\n%s", ph.table()) }()
	mountCgroups(t)
	ph.reach("cgroup v1 hierarchies mounted")
	t.Chdir(os.Getenv(guestRepoEnv)) // apiserver.RepoRoot walks up from here
	nodes := 1
	if v := os.Getenv(guestNodesEnv); v != "" {
		var err error
		if nodes, err = strconv.Atoi(v); err != nil {
			t.Fatalf("%s=%q: %v", guestNodesEnv, v, err)
		}
	}
	archives, err := filepath.Glob(filepath.Join(os.Getenv(guestImagesEnv), "*.tar"))
	if err != nil || len(archives) == 0 {
		t.Fatalf("no image archives in %s=%q (%v)", guestImagesEnv, os.Getenv(guestImagesEnv), err)
	}
	ctx := t.Context()
	log := slog.New(&phaseHandler{Handler: netns.TestLogger(t).Handler(), ph: ph})
	dir := t.TempDir()
	c, err := cluster.Up(ctx, cluster.Config{Nodes: nodes, Images: archives, Logger: log, Dir: dir, KeepDir: true,
		NoPivotRoot: true}) // the guest's root is its initramfs
	if err != nil {
		dumpLogs(t, dir)
		t.Fatal(err)
	}
	// No Down: the guest powers off after the test, and tearing the bed
	// down would cost minutes of TCG.
	defer func() {
		if t.Failed() {
			dumpCluster(t, c)
		}
	}()
	installIPVS(ctx, t, c, ph)
	checkClusterIP(ctx, t, c, ph)
}

// installIPVS installs CoreDNS and Switchyard (deploy/ through the base
// overlay with deploy/components/ipvs, whose init container writes the
// sysctls the unprivileged agent cannot, the agents in the ipvs mode),
// as InstallWithDNS does, with a
// phase at each wait; kubectl's own rollout timeouts are retried until
// the test's deadline, since TCG is slower than they assume.
func installIPVS(ctx context.Context, t *testing.T, c *cluster.Cluster, ph *phases) {
	t.Helper()
	if err := c.InstallPinnedDNS(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.InstallSwitchyard(ctx, cluster.OverlayBase, "ipvs"); err != nil {
		t.Fatal(err)
	}
	if c.Nodes() == 1 {
		// deploy/ runs two replicas with a required anti-affinity (host
		// ports): one of them could never be scheduled on one node.
		if _, err := c.Kubectl(ctx, "-n", cluster.SystemNS, "scale", "deployment/switchyard-controlplane", "--replicas=1"); err != nil {
			t.Fatal(err)
		}
	}
	ph.reach("CoreDNS and Switchyard applied")
	retry(ctx, t, c, "Switchyard rolled out", c.WaitSwitchyard)
	ph.reach("Switchyard pods Ready")
	retry(ctx, t, c, "every agent acked", func(ctx context.Context) error {
		_, err := c.WaitSettled(ctx)
		return err
	})
	ph.reach("every Switchyard agent acked")
	retry(ctx, t, c, "CoreDNS rolled out", c.WaitDNS)
	ph.reach("CoreDNS Ready (it lists Services through the kubernetes VIP)")
}

// checkClusterIP checks, from node 0, that IPVS holds CoreDNS's virtual
// servers and that the DNS cluster IP answers a query over UDP and
// accepts a TCP connection.
func checkClusterIP(ctx context.Context, t *testing.T, c *cluster.Cluster, ph *phases) {
	t.Helper()
	vip := cluster.DNSVIP.String()
	out, err := c.NodeExec(ctx, 0, "ipvsadm", "-Ln")
	if err != nil {
		t.Fatalf("ipvsadm -Ln on node-0: %v\n%s", err, out)
	}
	t.Logf("ipvsadm -Ln on node-0:\n%s", out)
	for _, proto := range []string{"TCP", "UDP"} {
		if !strings.Contains(string(out), proto+"  "+vip+":53") {
			t.Fatalf("no %s virtual server %s:53 in IPVS on node-0", proto, vip)
		}
	}
	ph.reach("IPVS holds the DNS virtual servers")
	out, err = c.NodeExec(ctx, 0, "nslookup", "kubernetes.default.svc.cluster.local", vip)
	if err != nil || !strings.Contains(string(out), cluster.KubernetesVIP.String()) {
		t.Fatalf("nslookup through %s from node-0: %v\n%s", vip, err, out)
	}
	conn, err := c.NodeDialContext(ctx, 0, vip+":53")
	if err != nil {
		t.Fatalf("TCP to %s:53 from node-0: %v", vip, err)
	}
	conn.Close()
	ph.reach("the DNS cluster IP answers through IPVS (UDP query, TCP connect)")
}

// phaseLimit bounds each wait after the install: a wait that has not
// ended by then will not (the run of record was Ready in seconds once
// its pods ran), and the rest of the guest's budget is better spent
// reporting why.
const phaseLimit = 10 * time.Minute

// retry calls wait until it succeeds, failing the test after phaseLimit
// or at the test's deadline; after each failed attempt it logs the pods,
// so that a stuck phase says what it waits for.
func retry(ctx context.Context, t *testing.T, c *cluster.Cluster, what string, wait func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, phaseLimit)
	defer cancel()
	for {
		// kubectl rollout status waits 3–5 min; the pods are logged sooner.
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Minute)
		err := wait(attempt)
		cancelAttempt()
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: not within %v: %v", what, phaseLimit, err)
		}
		pods, _ := c.Kubectl(ctx, "get", "pods", "-A", "-o", "wide")
		events, _ := c.Kubectl(ctx, "get", "events", "-A", "--sort-by=.lastTimestamp")
		logs, _ := c.Kubectl(ctx, "-n", cluster.SystemNS, "logs", "-l", "app.kubernetes.io/part-of=switchyard", "--tail=8", "--prefix")
		t.Logf("%s: not yet: %v\n%s\nthe last events:\n%s\nSwitchyard's last lines:\n%s", what, err, pods,
			tail(string(events), 15), logs)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// mountCgroups mounts the cgroup v1 hierarchies the bed expects (the
// layout of the machines it runs on: a tmpfs at /sys/fs/cgroup and one
// hierarchy per controller); the guest's /init mounts none.
func mountCgroups(t *testing.T) {
	t.Helper()
	root := "/sys/fs/cgroup"
	if _, err := os.Stat(filepath.Join(root, "cpu")); err == nil {
		return
	}
	if err := syscall.Mount("cgroup_root", root, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", root, err)
	}
	// hugetlb is optional for kubelet; the rest it or runc needs.
	for _, ctrl := range []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "hugetlb"} {
		dir := filepath.Join(root, ctrl)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("cgroup", dir, "cgroup", 0, ctrl); err != nil {
			if ctrl == "hugetlb" {
				t.Logf("cgroup %s: %v (optional)", ctrl, err)
				_ = os.Remove(dir)
				continue
			}
			t.Fatalf("mount cgroup %s: %v", ctrl, err)
		}
	}
}

// phases records when each step was reached, in the guest's uptime (from
// its kernel's start, so the boot and the initramfs count too).
type phases struct {
	logf func(string, ...any)
	list []guestPhase
}

type guestPhase struct {
	name   string
	uptime time.Duration
}

func (p *phases) reach(name string) {
	up := uptime()
	p.list = append(p.list, guestPhase{name, up})
	p.logf("GUEST-PHASE uptime=%s %s", up, name)
}

// table lists the phases with the time each took after the previous one.
func (p *phases) table() string {
	var b strings.Builder
	var prev time.Duration
	for _, ph := range p.list {
		fmt.Fprintf(&b, "| %s | %s | +%s |\n", ph.name, ph.uptime, ph.uptime-prev)
		prev = ph.uptime
	}
	return b.String()
}

func uptime() time.Duration {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	s, _, _ := strings.Cut(string(b), " ")
	f, _ := strconv.ParseFloat(s, 64)
	return time.Duration(f * float64(time.Second)).Round(time.Second)
}

// upPhases are the messages cluster.Up logs at the steps the report
// times, and the phase each is.
var upPhases = map[string]string{
	"cluster network ready": "network namespaces ready",
	"control plane ready":   "control plane ready (etcd, kube-apiserver, RBAC)",
	"images imported":       "images imported into containerd",
	"node started":          "kubelet started",
	"cluster up":            "every kubelet node Ready",
}

// phaseHandler passes records on and turns Up's progress messages into
// phases; Up runs its nodes concurrently, hence the node in the name.
type phaseHandler struct {
	slog.Handler
	ph *phases
}

func (h *phaseHandler) Handle(ctx context.Context, r slog.Record) error {
	name, ok := upPhases[r.Message]
	var node, component string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "node":
			node = a.Value.String()
		case "component":
			component = a.Value.String()
		}
		return true
	})
	if r.Message == "started" && component == "containerd" {
		name, ok = "containerd started", true
	}
	if ok {
		if node != "" {
			name += " (" + node + ")"
		}
		h.ph.reach(name)
	}
	return h.Handler.Handle(ctx, r)
}

func (h *phaseHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &phaseHandler{Handler: h.Handler.WithAttrs(as), ph: h.ph}
}

func (h *phaseHandler) WithGroup(name string) slog.Handler {
	return &phaseHandler{Handler: h.Handler.WithGroup(name), ph: h.ph}
}

// dumpLogs logs the tail of every component's log in the bed's state
// directory dir (KeepDir keeps it when Up fails).
func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("--- %s (last 25 lines):\n%s", l, tail(string(b), 25))
	}
}

// dumpCluster logs pods, events and the components' logs of a failed run.
func dumpCluster(t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"-n", cluster.SystemNS, "describe", "pods"},
		{"-n", cluster.SystemNS, "logs", "-l", "app.kubernetes.io/part-of=switchyard", "--tail=30", "--prefix"},
	} {
		out, err := c.Kubectl(ctx, args...)
		t.Logf("kubectl %v (err %v):\n%s", args, err, out)
	}
	dumpLogs(t, c.Dir())
}
