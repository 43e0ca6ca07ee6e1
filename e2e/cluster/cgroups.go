package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const cgroupMount = "/sys/fs/cgroup"

// hierarchies lists the cgroup v1 hierarchies (directories, not the
// cpu -> cpu,cpuacct symlinks; not the empty cgroup2 "unified").
func hierarchies() ([]string, error) {
	entries, err := os.ReadDir(cgroupMount)
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && e.Type()&fs.ModeSymlink == 0 && e.Name() != "unified" {
			out = append(out, filepath.Join(cgroupMount, e.Name()))
		}
	}
	return out, nil
}

// makeCgroups creates kubelet's cgroupRoot in every hierarchy; cpuset
// needs its cpus and mems copied from the parent before any task joins.
func makeCgroups(root string) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if filepath.Base(h) == "cpuset" || strings.Contains(filepath.Base(h), "cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

// cgroupDirs returns root's directories in every hierarchy, deepest first.
func cgroupDirs(root string) []string {
	hs, _ := hierarchies()
	var dirs []string
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, root), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return dirs
}

// cgroupPids lists every task in root's tree, in any hierarchy.
func cgroupPids(root string) []int {
	seen := map[int]bool{}
	for _, d := range cgroupDirs(root) {
		b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				seen[pid] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// killCgroupTree SIGKILLs every task in root's tree until none is left.
func killCgroupTree(root string) error {
	for range 50 {
		pids := cgroupPids(root)
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = syscallKill(p)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cgroup %s: tasks survive SIGKILL: %v", root, cgroupPids(root))
}

// removeCgroups removes root's directories, deepest first.
func removeCgroups(root string) error {
	var errs []error
	for _, d := range cgroupDirs(root) {
		var err error
		for range 20 { // a killed task leaves its cgroup a moment later
			if err = os.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
		}
	}
	return errors.Join(errs...)
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }
