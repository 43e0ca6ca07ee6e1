package cluster

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// Usage is the resident memory of every process of one kind ("kubelet",
// "switchyard-agent", "containerd-shim-runc-v2", …) summed over the bed.
type Usage struct {
	Name  string
	Count int
	RSS   uint64 // bytes
}

// Memory reads the resident set of every process the cluster runs: the
// control-plane components, each node's containerd and kubelet, every
// container (by its node cgroups) and every shim (by its node's mount
// namespace), grouped by executable name.
func (c *Cluster) Memory() []Usage {
	by := map[string]*Usage{}
	add := func(pid int) {
		comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil {
			return
		}
		rss, err := launch.RSS(pid)
		if err != nil {
			return
		}
		name := strings.TrimSpace(string(comm))
		u := by[name]
		if u == nil {
			u = &Usage{Name: name}
			by[name] = u
		}
		u.Count++
		u.RSS += rss
	}
	seen := map[int]bool{}
	visit := func(pid int) {
		if pid > 0 && !seen[pid] {
			seen[pid] = true
			add(pid)
		}
	}
	for _, p := range c.cp.procs {
		visit(p.Pid())
	}
	for _, n := range c.nodes {
		visit(pidOf(n.containerd))
		visit(pidOf(n.kubelet))
		for _, pid := range cgroupPids(n.cgroup) {
			visit(pid)
		}
		if n.holder != nil {
			for _, pid := range mountNSPids(n.holder.Pid()) {
				visit(pid)
			}
		}
	}
	out := make([]Usage, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		if k != "sleep" { // the holders
			out = append(out, *by[k])
		}
	}
	return out
}

// FormatMemory renders usages as "name×count RSS" items, largest first.
func FormatMemory(us []Usage) string {
	us = slices.Clone(us)
	slices.SortFunc(us, func(a, b Usage) int { return int(b.RSS>>10) - int(a.RSS>>10) })
	var b strings.Builder
	var total uint64
	for _, u := range us {
		total += u.RSS
		fmt.Fprintf(&b, "%s×%d %.0f MiB; ", u.Name, u.Count, float64(u.RSS)/(1<<20))
	}
	fmt.Fprintf(&b, "total %.0f MiB", float64(total)/(1<<20))
	return b.String()
}

// mountNSPids lists the processes sharing pid's mount namespace.
func mountNSPids(pid int) []int {
	want, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return nil
	}
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if mnt, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && mnt == want {
			out = append(out, p)
		}
	}
	return out
}
