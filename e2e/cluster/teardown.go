package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Down stops every node and control-plane process, deletes the network
// namespaces and cgroups and, unless KeepDir, the state directory. It is
// idempotent and runs after a failed Up too.
func (c *Cluster) Down(ctx context.Context) error {
	c.downOnce.Do(func() {
		begin := time.Now()
		var errs []error
		for _, n := range c.nodes {
			if n != nil {
				errs = append(errs, n.stop())
			}
		}
		for i := len(c.cp.procs) - 1; i >= 0; i-- { // etcd last
			errs = append(errs, c.cp.procs[i].Stop(3*time.Second))
		}
		if c.topo != nil {
			errs = append(errs, c.topo.Close(ctx))
		}
		if err := errors.Join(errs...); err == nil {
			if lo := c.Leftovers(); len(lo) > 0 {
				errs = append(errs, fmt.Errorf("teardown left %s", strings.Join(lo, "; ")))
			}
		}
		if !c.cfg.KeepDir && c.cfg.Dir != "" {
			errs = append(errs, os.RemoveAll(c.cfg.Dir))
		}
		c.downErr = errors.Join(errs...)
		c.log.Info("cluster down", "after", time.Since(begin).Round(time.Millisecond), "err", c.downErr)
	})
	return c.downErr
}

// Leftovers lists what of the cluster still exists on the machine: network
// namespaces, cgroups, processes in them, and mounts of the state directory
// in this process's mount namespace. Empty after a clean Down.
func (c *Cluster) Leftovers() []string {
	var out []string
	if c.topo != nil {
		for _, ns := range c.topo.Namespaces() {
			if _, err := os.Stat("/run/netns/" + ns); err == nil {
				out = append(out, "netns "+ns)
			}
		}
	}
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		if dirs := cgroupDirs(n.cgroup); len(dirs) > 0 {
			out = append(out, fmt.Sprintf("%d cgroups of %s", len(dirs), n.name))
		}
		if pids := cgroupPids(n.cgroup); len(pids) > 0 {
			out = append(out, fmt.Sprintf("processes %v in %s's cgroups", pids, n.name))
		}
		for _, p := range []int{pidOf(n.holder), pidOf(n.containerd), pidOf(n.kubelet)} {
			if p > 0 && processExists(p) {
				out = append(out, fmt.Sprintf("pid %d of %s", p, n.name))
			}
		}
	}
	for _, p := range c.cp.procs {
		if processExists(p.Pid()) {
			out = append(out, fmt.Sprintf("pid %d (%s)", p.Pid(), p.Name))
		}
	}
	if c.cfg.Dir != "" {
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
			for line := range strings.Lines(string(b)) {
				if strings.Contains(line, c.cfg.Dir) {
					out = append(out, "mount "+strings.TrimSpace(line))
				}
			}
		}
	}
	return out
}

func processExists(pid int) bool {
	// A reaped child has no /proc entry; a zombie would still show one.
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
