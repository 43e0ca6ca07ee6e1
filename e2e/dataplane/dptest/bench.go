package dptest

import (
	"context"
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

// DriftDataplane is a mode's Dataplane as BenchCheckDrift measures it.
type DriftDataplane interface {
	Dataplane
	CheckDrift(ctx context.Context) (dataplane.Drift, error)
}

// BenchCheckDrift applies BenchState(n, false) with dp, sets the drift
// baseline, and measures dp.CheckDrift in two sub-benchmarks:
//   - unchanged: nothing changed since the last check; the check must
//     read back only if unchangedReadBack;
//   - foreign-change: foreign makes its i-th change to what is not ours
//     (i counts from 1 over every run, so each change is new) before each
//     check, untimed; the check must read back and find nothing.
//
// self-cpu-us/op is this process's CPU during the checks, tools-cpu-us/op
// that of the commands r forked during them, wall-us/op their wall time.
func BenchCheckDrift(b *testing.B, r *Runner, dp DriftDataplane, n int, unchangedReadBack bool, foreign func(b *testing.B, i int)) {
	b.Helper()
	if err := dp.Apply(b.Context(), BenchState(n, false), dataplane.ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := dp.CheckDrift(b.Context()); err != nil { // sets the baseline
		b.Fatal(err)
	}
	changes := 0
	for _, tc := range []struct {
		name     string
		readBack bool
	}{{"unchanged", unchangedReadBack}, {"foreign-change", true}} {
		b.Run(tc.name, func(b *testing.B) {
			var self, tools, wall time.Duration
			for i := 0; i < b.N; i++ {
				if tc.name == "foreign-change" {
					b.StopTimer()
					changes++
					foreign(b, changes)
					b.StartTimer()
				}
				r.TakeCPU()
				c0, t0 := SelfCPU(), time.Now()
				dr, err := dp.CheckDrift(b.Context())
				wall += time.Since(t0)
				self += SelfCPU() - c0
				tools += r.TakeCPU()
				if err != nil || dr.Drifted() || dr.ReadBack != tc.readBack {
					b.Fatalf("%+v %v", dr, err)
				}
			}
			b.ReportMetric(float64(self.Microseconds())/float64(b.N), "self-cpu-us/op")
			b.ReportMetric(float64(tools.Microseconds())/float64(b.N), "tools-cpu-us/op")
			b.ReportMetric(float64(wall.Microseconds())/float64(b.N), "wall-us/op")
		})
	}
}

// TimedApply applies st with dp (a partial sync: a benchmark's first,
// untimed), failing the benchmark on error, and returns its wall time.
func TimedApply(b *testing.B, dp Dataplane, st *dataplane.State) time.Duration {
	b.Helper()
	start := time.Now()
	if err := dp.Apply(b.Context(), st, dataplane.ApplyOptions{}); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}
