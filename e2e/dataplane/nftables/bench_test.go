package nftables

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// BenchmarkSync measures syncs in a throwaway node namespace, IPv4, 5
// endpoints per service. Sub-benchmarks:
//   - full: a Full resync of an unchanged state (one transaction that
//     rewrites the table);
//   - one-endpoint: one endpoint of one service moves (partial sync);
//   - add-service: a service appears / disappears (partial sync);
//   - one-endpoint-netlink, add-service-netlink: the same partial syncs
//     sent over netlink (Config.PartialNetlink) by a second Dataplane;
//   - nft-floor: one "nft -f" of a single "add table" (what any
//     transaction costs at this table size: fork/exec plus nft's cache).
//
// Metrics: nft-cpu-ms is the user+system time of the nft processes,
// self-cpu-ms that of this process during Apply (render and diff of the
// whole state, and for netlink the kernel's commit, which runs in the
// sending thread), cpu-ms their sum; tx-wall-ms and tx-cpu-ms are the
// wall and CPU time of the transaction alone (SyncStats.TxTime; nft's CPU,
// or SyncStats.NetlinkCPU, the sending thread's). The first sync into an
// empty table is logged.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchOne(b, n) })
	}
}

func benchOne(b *testing.B, n int) {
	topo, r := dptest.BenchNode(b, runnerOptions)
	dp, err := nftables.New(nftables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	st := dptest.BenchState(n, false)
	first := dptest.TimedApply(b, dp, st)
	b.Logf("n=%d first sync %v wall, %v nft CPU (%d operations)", n, first, r.TakeCPU(), dp.LastSync().Operations)
	runFull(b, r, dp, st)
	runPartials(b, r, dp, st, n, "")
	// The same partial syncs sent over netlink: a second Dataplane (its
	// first sync is full, through nft, and not measured).
	dpNL, err := nftables.New(nftables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4},
		PartialNetlink: nsNetlink(topo, topo.Node(0).NS)})
	if err != nil {
		b.Fatal(err)
	}
	first = dptest.TimedApply(b, dpNL, st)
	b.Logf("n=%d netlink dataplane's first (full, nft) sync %v wall, %v nft CPU", n, first, r.TakeCPU())
	runPartials(b, r, dpNL, st, n, "-netlink")
	b.Run("nft-floor", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.Run(ctx, []string{"nft", "-f", "-"}, []byte("add table ip switchyard\n")); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(r.TakeCPU().Microseconds())/1000/float64(b.N), "nft-cpu-ms/op")
	})
}

// meter sums what the syncs of one sub-benchmark cost: nft operations,
// the CPU of the nft processes, and the CPU of this process (render,
// diff, and for netlink the kernel's commit work, which runs in the
// sending thread's sendmsg).
type meter struct {
	r         *dptest.Runner
	ops       int
	netlink   int
	fallbacks int
	self      time.Duration
	tx        time.Duration
	txCPU     time.Duration
}

func (m *meter) apply(b *testing.B, dp *nftables.Dataplane, st *dataplane.State, full bool) {
	t0 := dptest.SelfCPU()
	if err := dp.Apply(b.Context(), st, dataplane.ApplyOptions{Full: full}); err != nil {
		b.Fatal(err)
	}
	m.self += dptest.SelfCPU() - t0
	s := dp.LastSync()
	m.ops += s.Operations
	m.netlink += s.Netlink
	m.fallbacks += s.NetlinkFallbacks
	m.tx += s.TxTime
	m.txCPU += s.NetlinkCPU
}

func (m *meter) report(b *testing.B) {
	n := float64(b.N)
	nft := m.r.TakeCPU()
	b.ReportMetric(float64(m.ops)/n, "nftops/op")
	b.ReportMetric(float64(nft.Microseconds())/1000/n, "nft-cpu-ms/op")
	b.ReportMetric(float64(m.self.Microseconds())/1000/n, "self-cpu-ms/op")
	b.ReportMetric(float64((nft+m.self).Microseconds())/1000/n, "cpu-ms/op")
	b.ReportMetric(float64(m.tx.Microseconds())/1000/n, "tx-wall-ms/op")
	b.ReportMetric(float64((nft+m.txCPU).Microseconds())/1000/n, "tx-cpu-ms/op")
	if m.netlink+m.fallbacks > 0 {
		b.ReportMetric(float64(m.netlink)/n, "netlink/op")
		b.ReportMetric(float64(m.fallbacks)/n, "fallbacks/op")
	}
	*m = meter{r: m.r}
}

func runFull(b *testing.B, r *dptest.Runner, dp *nftables.Dataplane, st *dataplane.State) {
	r.TakeCPU()
	b.Run("full", func(b *testing.B) {
		m := &meter{r: r}
		for b.Loop() {
			m.apply(b, dp, st, true)
		}
		m.report(b)
	})
}

// runPartials measures partial syncs that flip between st and a state
// with one endpoint moved, or one service more.
func runPartials(b *testing.B, r *dptest.Runner, dp *nftables.Dataplane, st *dataplane.State, n int, suffix string) {
	for _, c := range []struct {
		name string
		alt  *dataplane.State
	}{
		{"one-endpoint", dptest.WithService(st, dptest.BenchService(n/2, true))},
		{"add-service", dptest.WithService(st, dptest.BenchService(n, false))},
	} {
		r.TakeCPU()
		b.Run(c.name+suffix, func(b *testing.B) {
			m := &meter{r: r}
			dptest.Alternate(b, st, c.alt, func(s *dataplane.State) { m.apply(b, dp, s, false) })
			m.report(b)
			m.apply(b, dp, st, false)
			m.r.TakeCPU()
		})
	}
}

// BenchmarkFirstSync measures what an agent's first sync costs in
// nftables mode: a new Dataplane (both families, as the agent's) applies
// n services to a namespace whose tables are empty, learning first what
// the kernel holds. Between iterations the tables are deleted, untimed
// (not through the measured runner). nft-cpu-ms is the nft processes'
// CPU (user + system: the kernel's commit runs there), self-cpu-ms this
// process's (render and plan).
func BenchmarkFirstSync(b *testing.B) {
	for _, n := range []int{1000, 5000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { benchFirstSync(b, n) })
	}
}

func benchFirstSync(b *testing.B, n int) {
	topo, r := dptest.BenchNode(b, runnerOptions)
	ns := topo.Node(0).NS
	st := dptest.BenchState(n, false)
	var self time.Duration
	r.TakeCPU()
	for b.Loop() {
		// As the agent runs it: the table listed over netlink.
		dp, err := nftables.New(nftables.Config{Runner: r, PartialNetlink: nsNetlink(topo, ns)})
		if err != nil {
			b.Fatal(err)
		}
		t0 := dptest.SelfCPU()
		if err := dp.Apply(b.Context(), st, dataplane.ApplyOptions{Full: true}); err != nil {
			b.Fatal(err)
		}
		self += dptest.SelfCPU() - t0
		b.StopTimer()
		for _, fam := range []string{"ip", "ip6"} {
			if _, err := topo.Exec(b.Context(), ns, "nft", "delete", "table", fam, nftables.DefaultTable); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(r.TakeCPU().Microseconds())/1000/float64(b.N), "nft-cpu-ms/op")
	b.ReportMetric(float64(self.Microseconds())/1000/float64(b.N), "self-cpu-ms/op")
}
