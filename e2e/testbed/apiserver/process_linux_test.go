package apiserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestProcessStopEscalates starts a shell that ignores SIGTERM and keeps
// spawning children, and checks that stop kills the whole group after the
// grace period.
func TestProcessStopEscalates(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "sh.log")
	script := `trap '' TERM; echo started; while :; do sleep 0.05; done`
	p, err := startProcess("sh", "/bin/sh", []string{"-c", script}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(time.Millisecond) })

	waitUntil(t, 10*time.Second, func() bool {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "started")
	})
	if done, err := p.exited(); done {
		t.Fatalf("shell exited early: %v", err)
	}

	const grace = 300 * time.Millisecond
	begin := time.Now()
	if err := p.stop(grace); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(begin); took < grace {
		t.Errorf("stop took %v; a SIGTERM-ignoring process needs the %v grace before SIGKILL", took, grace)
	}
	// Grandchildren (the sleeps) are SIGKILLed too; init reaps them
	// shortly after, so the group empties without our help.
	waitUntil(t, 10*time.Second, func() bool {
		return errors.Is(syscall.Kill(-p.pid(), 0), syscall.ESRCH)
	})
	if err := p.stop(grace); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

func TestProcessStopGraceful(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "sleep.log")
	p, err := startProcess("sleep", "/bin/sleep", []string{"600"}, logPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.stop(time.Minute); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(p.pid())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid %d still in /proc after stop: %v", p.pid(), err)
	}
}

func TestSweepStale(t *testing.T) {
	parent := t.TempDir()
	mine, err := makeStateDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	// A finished child's pid is a pid whose owner is certainly gone.
	p, err := startProcess("true", "/bin/true", nil, filepath.Join(parent, "true.log"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	stale := filepath.Join(parent, stateDirPrefix+"stale")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, ownerFile), []byte(strconv.Itoa(p.pid())), 0o600); err != nil {
		t.Fatal(err)
	}
	unowned := filepath.Join(parent, stateDirPrefix+"unowned")
	if err := os.MkdirAll(unowned, 0o700); err != nil {
		t.Fatal(err)
	}

	sweepStale(parent, discardLogger())

	for dir, wantExists := range map[string]bool{mine: true, stale: false, unowned: true} {
		_, err := os.Stat(dir)
		if exists := err == nil; exists != wantExists {
			t.Errorf("%s exists = %v, want %v", filepath.Base(dir), exists, wantExists)
		}
	}
}

// waitUntil polls cond every 10ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("condition not met within %v: %v", timeout, err)
	}
}
