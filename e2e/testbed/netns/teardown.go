package netns

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Close stops every process started in the topology (by PID: SIGTERM, then
// SIGKILL, then wait), kills any other process still inside one of its
// namespaces, deletes the namespaces and checks that none remains. It is
// idempotent; the first call does the work.
func (t *Topology) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	procs := make([]*Process, 0, len(t.procs))
	for p := range t.procs {
		procs = append(procs, p)
	}
	created := slices.Clone(t.created)
	ids := map[nsID]string{}
	for name, m := range t.members {
		// Never hunt processes in a forbidden namespace, whatever got in.
		if t.guard.check(m.id, name) == nil {
			ids[m.id] = name
		}
	}
	t.mu.Unlock()

	start := time.Now()
	errs := []error{
		stopAll(ctx, procs),
		t.killStragglers(ctx, ids),
		deleteNamespaces(ctx, created),
	}
	errs = append(errs, verifyDeleted(created))
	err := errors.Join(errs...)
	t.log.Info("topology torn down", "namespaces", len(created), "processes", len(procs),
		"elapsed", time.Since(start).Round(time.Millisecond), "ok", err == nil)
	if err != nil {
		return fmt.Errorf("close topology %s: %w", t.plan.ID, err)
	}
	return nil
}

// killStragglers SIGKILLs processes that live in one of the topology's
// namespaces but were not started by Start (e.g. daemonised grandchildren):
// `ip netns del` would leave them running with the namespace alive.
func (t *Topology) killStragglers(ctx context.Context, ids map[nsID]string) error {
	if len(ids) == 0 {
		return nil
	}
	killed := map[int]string{}
	for pid, name := range processesIn(ids) {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		t.log.Warn("killing untracked process left in namespace", "ns", name, "pid", pid,
			"comm", strings.TrimSpace(string(comm)))
		if err := killPid(pid, ids); err != nil {
			return err
		}
		killed[pid] = name
	}
	if len(killed) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		left := processesIn(ids)
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes still in namespaces after SIGKILL: %v: %w", left, ctx.Err())
		case <-tick.C:
		}
	}
}

// processesIn scans /proc for processes (other than this one) whose network
// namespace is one of ids. Exited or inaccessible processes are skipped.
func processesIn(ids map[nsID]string) map[int]string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	found := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		id, err := statNS("/proc/" + e.Name() + "/ns/net")
		if err != nil {
			continue
		}
		if name, ok := ids[id]; ok {
			found[pid] = name
		}
	}
	return found
}

// killPid sends SIGKILL through a pidfd after re-checking, on the pidfd's
// process, that it is still inside one of ids (no PID-reuse race).
func killPid(pid int, ids map[nsID]string) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	id, err := statNS("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil // exited meanwhile
	}
	if _, ok := ids[id]; !ok {
		return nil // PID was reused by a process elsewhere
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	return nil
}

// deleteNamespaces runs `ip netns del` for every created name. It runs even
// when ctx is already cancelled (an interrupted run must still clean up), and
// one failure does not stop the other deletions.
func deleteNamespaces(ctx context.Context, names []string) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(8)
	for _, name := range names {
		g.Go(func() error {
			out, err := exec.CommandContext(dctx, "ip", "netns", "del", name).CombinedOutput()
			if err != nil {
				if _, serr := os.Lstat(nsPath(name)); errors.Is(serr, fs.ErrNotExist) {
					return nil
				}
				return fmt.Errorf("ip netns del %s: %w: %s", name, err, strings.TrimSpace(string(out)))
			}
			return nil
		})
	}
	return g.Wait()
}

// verifyDeleted reports names that still exist under /run/netns.
func verifyDeleted(names []string) error {
	var left []string
	for _, name := range names {
		if _, err := os.Lstat(nsPath(name)); !errors.Is(err, fs.ErrNotExist) {
			left = append(left, name)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("namespaces left after teardown: %s", strings.Join(left, ", "))
	}
	return nil
}
