package iptables

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// BenchmarkSync measures syncs in a throwaway node namespace, on both
// flavours, for the sharded structure (the Dataplane) and for
// kube-proxy's (kubeProxyShape: flat KUBE-SERVICES, a KUBE-SEP chain per
// endpoint, top-level chains rewritten on every sync). Sub-benchmarks:
//   - full: a Full resync of an unchanged state (read-back + rewrite all);
//   - one-endpoint: one endpoint of one service moves (partial sync);
//   - add-service: a service appears / disappears (partial sync);
//   - all-move (sharded only): a Full sync where one endpoint of every
//     service moves (a third of the chains written: on nft a whole-table
//     rewrite of a populated table).
//
// SWITCHYARD_BENCH_10K=1 adds 10,000 services; SWITCHYARD_BENCH_NO_REWRITE=1
// disables the whole-table rewrite (Config.RewriteTablesAbove = -1) to
// compare it with the batched --noflush path.
func BenchmarkSync(b *testing.B) {
	sizes := []int{1000, 5000}
	if os.Getenv("SWITCHYARD_BENCH_10K") != "" {
		sizes = append(sizes, 10000)
	}
	for _, fl := range flavours {
		for _, shape := range []string{"sharded", "kube-proxy"} {
			for _, n := range sizes {
				b.Run(fmt.Sprintf("%s/%s/services=%d", fl, shape, n), func(b *testing.B) {
					benchOne(b, fl, shape == "kube-proxy", n)
				})
			}
		}
	}
}

// syncer is what BenchmarkSync measures: the Dataplane or kubeProxyShape.
type syncer interface {
	Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error
	LastSync() dataplane.SyncStats
}

func benchOne(b *testing.B, fl xtables.Flavour, kubeProxy bool, n int) {
	_, r := dptest.BenchNode(b, runnerOptions)
	var dp syncer = newKubeProxyShape(r, fl)
	if !kubeProxy {
		cfg := iptables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4}, Flavour: fl}
		if os.Getenv("SWITCHYARD_BENCH_NO_REWRITE") != "" {
			cfg.RewriteTablesAbove = -1
		}
		var err error
		if dp, err = iptables.New(cfg); err != nil {
			b.Fatal(err)
		}
	}
	ctx := b.Context()
	st := dptest.BenchState(n, false)
	first := dptest.TimedApply(b, dp, st)
	b.Logf("%s kubeProxy=%v n=%d first sync %v (%d restores, %d rewriting tables)", fl, kubeProxy, n,
		first, dp.LastSync().Restores, dp.LastSync().TableRewrites)
	var written, restores, rewrites int
	var selfCPU, toolCPU time.Duration
	apply := func(b *testing.B, st *dataplane.State, full bool) {
		self0, tool0 := dptest.SelfCPU(), dptest.ChildrenCPU()
		if err := dp.Apply(ctx, st, dataplane.ApplyOptions{Full: full}); err != nil {
			b.Fatal(err)
		}
		self1, tool1 := dptest.SelfCPU(), dptest.ChildrenCPU()
		selfCPU += self1 - self0
		toolCPU += tool1 - tool0
		s := dp.LastSync()
		written += s.ChainsWritten
		restores += s.Restores
		rewrites += s.TableRewrites
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(written)/float64(b.N), "chains/op")
		b.ReportMetric(float64(restores)/float64(b.N), "restores/op")
		b.ReportMetric(float64(rewrites)/float64(b.N), "rewrites/op")
		// CPU time, unlike wall time, does not count waiting for a CPU on
		// a loaded machine: the agent's own (render, diff) and the
		// iptables binaries' (user + system, the kernel's work included).
		b.ReportMetric(float64(selfCPU.Milliseconds())/float64(b.N), "agent-cpu-ms/op")
		b.ReportMetric(float64(toolCPU.Milliseconds())/float64(b.N), "iptables-cpu-ms/op")
		written, restores, rewrites = 0, 0, 0
		selfCPU, toolCPU = 0, 0
	}
	b.Run("full", func(b *testing.B) {
		for b.Loop() {
			apply(b, st, true)
		}
		report(b)
	})
	moved := dptest.WithService(st, dptest.BenchService(n/2, true))
	b.Run("one-endpoint", func(b *testing.B) {
		dptest.Alternate(b, st, moved, func(s *dataplane.State) { apply(b, s, false) })
		report(b)
		apply(b, st, false)
	})
	added := dptest.WithService(st, dptest.BenchService(n, false))
	b.Run("add-service", func(b *testing.B) {
		dptest.Alternate(b, st, added, func(s *dataplane.State) { apply(b, s, false) })
		report(b)
		apply(b, st, false)
	})
	if kubeProxy {
		return // a full sync there rewrites every chain anyway (see full)
	}
	allMoved := dptest.BenchState(n, true)
	b.Run("all-move", func(b *testing.B) {
		dptest.Alternate(b, st, allMoved, func(s *dataplane.State) { apply(b, s, true) })
		report(b)
	})
}
