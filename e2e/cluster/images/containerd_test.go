package images

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repoRoot is the checkout holding this package: the directory with go.work.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d
		}
	}
	t.Skipf("no go.work above %s", dir)
	return ""
}

// containerd is a throwaway containerd on its own socket, root and state
// directories; nothing of the machine's /run/containerd or
// /var/lib/containerd is used.
type containerd struct {
	dir  string
	sock string
	log  *bytes.Buffer
}

func startContainerd(t *testing.T) *containerd {
	t.Helper()
	// A short directory: the socket path must fit in a sockaddr_un.
	dir, err := os.MkdirTemp("", "syctrd-")
	if err != nil {
		t.Fatal(err)
	}
	c := &containerd{dir: dir, sock: filepath.Join(dir, "c.sock"), log: &bytes.Buffer{}}
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, c.sock+".ttrpc", filepath.Join(dir, "opt"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("containerd", "--config", cfgPath,
		"--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"), "--address", c.sock)
	cmd.Stdout, cmd.Stderr = c.log, c.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	t.Logf("containerd pid %d in %s", cmd.Process.Pid, dir)
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // only the process this test started
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("containerd log:\n%s", c.log)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := exec.Command("ctr", "-a", c.sock, "version").Run()
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd not serving on %s after 30 s: %v\n%s", c.sock, err, c.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *containerd) ctr(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	full := append([]string{"-a", c.sock, "-n", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	return string(out)
}

// TestImportIntoContainerd builds the pause and busybox archives and
// imports them into a throwaway containerd, which must list each under its
// full reference and manifest digest.
func TestImportIntoContainerd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a throwaway containerd")
	}
	if _, err := os.Stat("/usr/bin/containerd"); err != nil {
		t.Skip("no /usr/bin/containerd")
	}
	for _, tool := range []string{"ctr", "gcc", hostBusybox} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: %v", tool, err)
		}
	}
	archives, err := Build(t.Context(), Options{
		RepoRoot: repoRoot(t),
		CacheDir: t.TempDir(),
		Only:     []string{Pause, Busybox},
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if len(archives) != 2 {
		t.Fatalf("Build made %d archives, want 2: %+v", len(archives), archives)
	}
	c := startContainerd(t)
	for _, a := range archives {
		t.Logf("import %s: %s", a.Ref, c.ctr(t.Context(), t, "images", "import", "--snapshotter", "native", a.Path))
	}
	ls := c.ctr(t.Context(), t, "images", "ls")
	t.Logf("ctr images ls:\n%s", ls)
	listed := map[string]string{} // ref → digest
	for _, line := range strings.Split(ls, "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 3 {
			listed[f[0]] = f[2]
		}
	}
	for _, a := range archives {
		if got, ok := listed[a.Ref]; !ok || got != a.Digest {
			t.Errorf("containerd lists %s as %q (present %v), want digest %s", a.Ref, got, ok, a.Digest)
		}
	}
	if len(listed) != len(archives) {
		t.Errorf("containerd lists %d images, want %d (no extra names)", len(listed), len(archives))
	}
	// The snapshots exist: the layers unpacked.
	snaps := c.ctr(t.Context(), t, "snapshots", "--snapshotter", "native", "ls")
	if strings.Count(strings.TrimSpace(snaps), "\n") < len(archives) {
		t.Errorf("snapshots after unpack:\n%s", snaps)
	}
}
