package ipvs

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

const (
	// clusterEnv opts in to TestClusterBedInGuest (make ipvs-cluster).
	clusterEnv = "SWITCHYARD_GUEST_CLUSTER"
	// clusterNodesEnv is the number of kubelet nodes in the guest (default
	// 1); the guest test reads the same name.
	clusterNodesEnv = "SWITCHYARD_GUEST_CLUSTER_NODES"
	// clusterPkg is e2e/cluster, relative to the e2e module; clusterTest
	// its test that brings the bed up when it runs in the guest.
	clusterPkg  = "./cluster"
	clusterTest = "TestBedInGuest"
	// maxClusterTime bounds the guest's run (its watchdog).
	maxClusterTime = 45 * time.Minute
	// clusterMem is the guest's memory (MiB) unless SWITCHYARD_QEMU_MEM
	// says otherwise: the initramfs (~900 MiB of binaries and image
	// archives) is unpacked into RAM, containerd keeps the images again
	// in its content store and unpacked in snapshots, and the control
	// plane, kubelet, CoreDNS and Switchyard run beside them.
	clusterMem = "6144"
)

// Where the guest finds the bed's inputs (SWITCHYARD_QEMU_ADD); the guest
// test is told by SWITCHYARD_QEMU_ENV.
const (
	guestImagesDir = "/opt/images"
	guestRepoDir   = "/opt/src"
)

// clusterTestbed are the test bed's binaries the bed starts.
var clusterTestbed = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"}

// clusterHostBins are this machine's executables the bed runs (copied
// with their libraries): the container runtime, CNI's plugins, and
// util-linux's unshare and mount (the node's holder takes
// --propagation; its mount script makes kubelet's root rshared).
var clusterHostBins = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "unshare", "mount", "umount",
	"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap", "/usr/lib/cni/loopback"}

// TestClusterBedInGuest runs the real-cluster bed (e2e/cluster) inside the
// QEMU guest, whose kernel has IPVS: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, containerd and kubelet per
// node, CoreDNS and Switchyard from deploy/ with the agents in the ipvs
// mode. The guest test logs each phase it reaches with the guest's
// uptime; they are logged here as a table whatever the outcome, since
// under TCG the honest result may be how far it got. Opt-in
// (SWITCHYARD_GUEST_CLUSTER=1, make ipvs-cluster).
func TestClusterBedInGuest(t *testing.T) {
	if os.Getenv(clusterEnv) == "" {
		t.Skipf("opt-in, up to %v under TCG: %s=1 (make ipvs-cluster)", maxClusterTime, clusterEnv)
	}
	root := requireGuestHost(t)
	add := clusterFiles(t, root)
	bin := buildGuest(t, root, clusterPkg)
	budget := guestBudget(t, maxClusterTime)
	console := filepath.Join(t.TempDir(), "console.log")
	nodes := cmp.Or(os.Getenv(clusterNodesEnv), "1")
	env := []string{
		"SWITCHYARD_QEMU_ADD=" + add,
		"SWITCHYARD_QEMU_LOG=" + console,
		"SWITCHYARD_QEMU_ENV=" + strings.Join([]string{
			apiserver.EnvBinDir + "=" + guestTestbedDir,
			"SWITCHYARD_GUEST_IMAGES=" + guestImagesDir,
			"SWITCHYARD_GUEST_REPO=" + guestRepoDir,
			clusterNodesEnv + "=" + nodes,
		}, "\n"),
		"SWITCHYARD_QEMU_MEM=" + cmp.Or(os.Getenv("SWITCHYARD_QEMU_MEM"), clusterMem),
	}
	// The table even when runGuest stops the test (no verdict: the
	// watchdog fired): the console file has what the guest printed.
	defer func() {
		b, _ := os.ReadFile(console)
		t.Logf("%s phases (%s node(s); guest uptime, and the time since the previous phase):\n%s",
			clusterTest, nodes, phaseTable(string(b)))
	}()
	args := []string{"-test.v", "-test.count=1", "-test.run=^" + clusterTest + "$",
		"-test.timeout=" + (budget - guestTimeoutSlack).String()}
	res := runGuest(t, root, bin, budget, env, args...)
	rep := parseGuest(res.Console)
	for _, gt := range rep.Tests {
		if gt.Name == clusterTest {
			t.Logf("%s %s in the guest after %s (the guest ran %v)", clusterTest, gt.Status, gt.Elapsed, res.Elapsed.Round(time.Second))
			if gt.Status != "PASS" {
				// All of it: the pods, events and logs the guest dumped
				// come before its phase table and are lost with the guest.
				t.Errorf("%s %s; its output:\n%s", clusterTest, cmp.Or(gt.Status, "stopped"), strings.Join(gt.Output, "\n"))
			}
			return
		}
	}
	t.Fatalf("the guest did not run %s (exit %d); console (last 80 lines):\n%s", clusterTest, rep.Exit, tail(res.Console, 80))
}

// clusterFiles lays out what the guest's root gets besides the test
// binary: the test bed's binaries, the image archives (built here: the
// guest has no network), the part of the checkout the bed reads, and
// this machine's container runtime and CNI plugins with their libraries.
func clusterFiles(t *testing.T, root string) string {
	t.Helper()
	testbed, err := apiserver.BinDir()
	if err != nil {
		skipOrFail(t, "the cluster bed needs the test bed's binaries (make testbed): %v", err)
	}
	add := t.TempDir()
	if err := os.Mkdir(filepath.Join(add, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range clusterTestbed {
		if err := linkInto(add, filepath.Join(guestTestbedDir, name), filepath.Join(testbed, name)); err != nil {
			skipOrFail(t, "the cluster bed needs %s (make testbed): %v", name, err)
		}
	}
	start := time.Now()
	archives, err := images.Build(t.Context(), images.Options{RepoRoot: root, BinDir: testbed, Tag: cluster.ImageTag,
		Only: []string{images.ControlPlane, images.Agent, images.Pause, images.CoreDNS}})
	if err != nil {
		t.Fatalf("images: %v", err)
	}
	for _, a := range archives {
		if err := linkInto(add, filepath.Join(guestImagesDir, a.FileName()), a.Path); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("images ready in %v", time.Since(start).Round(time.Millisecond))
	for _, f := range []string{"go.work", "hack/versions.env"} {
		if err := linkInto(add, filepath.Join(guestRepoDir, f), filepath.Join(root, f)); err != nil {
			t.Fatal(err)
		}
	}
	// Directories are copied: the script's archive follows symlinks to
	// files, not into directories.
	for _, d := range []string{"deploy", "e2e/cluster/overlays"} {
		if err := os.CopyFS(filepath.Join(add, guestRepoDir, d), os.DirFS(filepath.Join(root, d))); err != nil {
			t.Fatalf("copy %s: %v", d, err)
		}
	}
	// kubelet gives pods of dnsPolicy Default (CoreDNS) the node's
	// resolv.conf, and has no pod sandbox without one; the guest has no
	// network, so it names a documentation address (RFC 5737) that
	// never answers, which CoreDNS forwards other names to.
	if err := os.WriteFile(filepath.Join(add, "etc", "resolv.conf"), []byte("nameserver 192.0.2.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hostExecutables(add, clusterHostBins); err != nil {
		skipOrFail(t, "the cluster bed in the guest runs this machine's container runtime (make apt-deps): %v", err)
	}
	return add
}

// hostExecutables links each executable (a path, or a name looked up in
// PATH) and every library ldd reports for it into add at the same path.
func hostExecutables(add string, bins []string) error {
	libs := map[string]bool{}
	for _, b := range bins {
		path, err := exec.LookPath(b)
		if err != nil {
			return err
		}
		if err := linkInto(add, path, path); err != nil {
			return err
		}
		// ldd fails on a static executable: it has no libraries to copy.
		out, _ := exec.Command("ldd", path).Output()
		for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
			libs[m[1]] = true
		}
	}
	for lib := range libs {
		if err := linkInto(add, lib, lib); err != nil {
			return err
		}
	}
	return nil
}

// lddPath matches the absolute paths in ldd's output: "libx.so => /lib/…
// (0x…)" and the interpreter's "/lib64/ld-linux-x86-64.so.2 (0x…)".
var lddPath = regexp.MustCompile(`(?m)(?:=> |^\s+)(/\S+) \(0x`)

// linkInto makes add/rel a symlink to target, which the script's archive
// follows.
func linkInto(add, rel, target string) error {
	if _, err := os.Stat(target); err != nil {
		return err
	}
	dst := filepath.Join(add, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Symlink(target, dst)
}

// phaseLine is a phase the guest test reached; beginLine is /init's last
// line before the test starts.
var (
	phaseLine = regexp.MustCompile(`GUEST-PHASE uptime=(\S+) (.*)$`)
	beginLine = regexp.MustCompile(`^SWITCHYARD-GUEST-BEGIN uptime=([0-9.]+)s`)
)

// phaseTable lists the phases in a console as Markdown rows: the guest
// booted, then every phase the guest test reached, each with the guest's
// uptime and the time since the previous one.
func phaseTable(console string) string {
	var b strings.Builder
	var prev time.Duration
	row := func(name string, at time.Duration) {
		fmt.Fprintf(&b, "| %s | %s | +%s |\n", name, at, at-prev)
		prev = at
	}
	for _, line := range strings.Split(console, "\n") {
		if m := beginLine.FindStringSubmatch(line); m != nil {
			if d, err := time.ParseDuration(m[1] + "s"); err == nil {
				row("guest booted (modules loaded)", d.Round(time.Second))
			}
		} else if m := phaseLine.FindStringSubmatch(line); m != nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				row(m[2], d)
			}
		}
	}
	if b.Len() == 0 {
		return "(no phase: the guest did not boot)"
	}
	return b.String()
}

func TestPhaseTable(t *testing.T) {
	console := strings.Join([]string{
		"SWITCHYARD-GUEST-BEGIN uptime=12.34s",
		"    guest_test.go:44: GUEST-PHASE uptime=14s test started",
		"noise",
		"    guest_test.go:44: GUEST-PHASE uptime=1m14s control plane ready",
	}, "\n")
	want := "| guest booted (modules loaded) | 12s | +12s |\n" +
		"| test started | 14s | +2s |\n" +
		"| control plane ready | 1m14s | +1m0s |\n"
	if got := phaseTable(console); got != want {
		t.Errorf("phaseTable:\n got %q\nwant %q", got, want)
	}
}
