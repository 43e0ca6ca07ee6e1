package dptest

import (
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// BenchNode is a benchmark's bare node namespace (no pods), torn down
// when the benchmark ends, and a Runner for it that works as o says.
func BenchNode(b *testing.B, o RunnerOptions) (*netns.Topology, *Runner) {
	b.Helper()
	netns.RequireRoot(b)
	topo, err := netns.Create(b.Context(), netns.Spec{Nodes: 1}, netns.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = topo.Close(b.Context()) })
	return topo, NewRunner(topo, topo.Node(0).NS, o)
}

// Alternate is a benchmark's loop: it applies alt on odd iterations and
// st on even ones, so every iteration is one change from the state the
// previous one left. The loop ends on whichever came last; a benchmark
// that goes on from st applies st again.
func Alternate(b *testing.B, st, alt *dataplane.State, apply func(*dataplane.State)) {
	i := 0
	for b.Loop() {
		if i++; i%2 == 1 {
			apply(alt)
		} else {
			apply(st)
		}
	}
}

// SelfCPU returns the CPU time (user + system) this process has used so
// far. CPU time, unlike wall time, does not count waiting for a CPU on a
// loaded machine.
func SelfCPU() time.Duration { return rusageCPU(syscall.RUSAGE_SELF) }

// ChildrenCPU returns the CPU time (user + system) of this process's
// waited-for children so far.
func ChildrenCPU() time.Duration { return rusageCPU(syscall.RUSAGE_CHILDREN) }

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
