package latency

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Markdown renders the report: one row per proxy and run, the ratios of
// each run, and with several runs the minimum and median across them.
func Markdown(rep *Report) string {
	var b strings.Builder
	s := rep.Settings
	fmt.Fprintf(&b, "Network programming latency on the real-cluster bed: %d kubelet nodes, %d scale events per proxy "+
		"(alternating %d→%d→%d replicas, %g s settling gap, readiness probe delay %g s), %d run(s); measured %s on %s, Switchyard %s, Kubernetes %s.\n\n",
		s.Nodes, s.Events, s.BaseReplicas, s.BaseReplicas+1, s.BaseReplicas, s.GapSeconds, s.ReadyDelaySeconds, s.Runs,
		rep.Started.Format("2006-01-02 15:04"), rep.Host, rep.Versions["switchyard"], rep.Versions["kubernetes"])
	if rep.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", rep.Command)
	}
	b.WriteString("Every time is the slowest node's (the event reached every node), from the pod's Ready (scale-up) or " +
		"deletion (scale-down) as the harness's watch saw it to the end of the first read of that node's rules showing " +
		"the change; nearest-rank percentiles, milliseconds.\n\n")
	b.WriteString("| proxy | run | events | p50 | p99 | max | up p50 / p99 | down p50 / p99 | from the slice p50 / p99 | " +
		"own histogram: n, p50 / p99 (harness, same start) | read |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Records {
		note := ""
		if r.Err != "" {
			note = " (stopped: " + r.Err + ")"
		}
		fmt.Fprintf(&b, "| %s%s | %d | %d | %s | %s | %s | %s / %s | %s / %s | %s / %s | %d, %s / %s (%s / %s) | %s |\n",
			r.Proxy, note, r.Run, r.All.N, ms(r.All.P50), ms(r.All.P99), ms(r.All.Max),
			ms(r.Up.P50), ms(r.Up.P99), ms(r.Down.P50), ms(r.Down.P99), ms(r.FromSlice.P50), ms(r.FromSlice.P99),
			r.Metric.Attributed.N, ms(r.Metric.Attributed.P50), ms(r.Metric.Attributed.P99),
			ms(r.Metric.Harness.P50), ms(r.Metric.Harness.P99), ms(r.ReadMedianSeconds))
	}
	if len(rep.Ratios) > 0 {
		b.WriteString("\nkube-proxy ÷ Switchyard, same mode, same run (above 1: Switchyard faster):\n\n")
		b.WriteString("| mode | run | p50 | p99 | max |\n|---|---|---|---|---|\n")
		for _, k := range ratioKeys(rep.Ratios) {
			byStat := map[string]Ratio{}
			for _, r := range rep.Ratios {
				if r.Mode == k.mode && r.Run == k.run {
					byStat[r.Stat] = r
				}
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", k.mode, k.run,
				ratioCell(byStat["p50"]), ratioCell(byStat["p99"]), ratioCell(byStat["max"]))
		}
	}
	if s.Runs > 1 {
		acrossRuns(&b, rep)
	}
	return b.String()
}

// acrossRuns writes the minimum and median over runs of each proxy's
// p50, p99 and max, and of each ratio.
func acrossRuns(b *strings.Builder, rep *Report) {
	b.WriteString("\nAcross runs, min / median of the runs' values:\n\n")
	b.WriteString("| proxy | runs | p50 | p99 | max |\n|---|---|---|---|---|\n")
	byProxy := map[string][]Record{}
	for _, r := range rep.Records {
		if r.All.N > 0 {
			byProxy[r.Proxy] = append(byProxy[r.Proxy], r)
		}
	}
	for _, name := range rep.Settings.Proxies {
		rs := byProxy[name]
		if len(rs) == 0 {
			continue
		}
		col := func(f func(Record) float64) string {
			var xs []float64
			for _, r := range rs {
				xs = append(xs, f(r))
			}
			st := stats(xs)
			return ms(st.Min) + " / " + ms(lowMedian(xs))
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", name, len(rs),
			col(func(r Record) float64 { return r.All.P50 }), col(func(r Record) float64 { return r.All.P99 }),
			col(func(r Record) float64 { return r.All.Max }))
	}
	if len(rep.Ratios) == 0 {
		return
	}
	b.WriteString("\n| kube-proxy ÷ Switchyard | runs | p50 | p99 | max |\n|---|---|---|---|---|\n")
	modes := map[string]map[string][]float64{}
	for _, r := range rep.Ratios {
		if modes[r.Mode] == nil {
			modes[r.Mode] = map[string][]float64{}
		}
		modes[r.Mode][r.Stat] = append(modes[r.Mode][r.Stat], r.Ratio)
	}
	for _, mode := range slices.Sorted(maps.Keys(modes)) {
		cell := func(stat string) string {
			xs := modes[mode][stat]
			return fmt.Sprintf("%.2f× / %.2f×", stats(xs).Min, lowMedian(xs))
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", mode, len(modes[mode]["p50"]), cell("p50"), cell("p99"), cell("max"))
	}
}

// lowMedian is the median, the lower middle value for an even count (a
// value that was measured).
func lowMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[(len(s)-1)/2]
}

type ratioKey struct {
	mode string
	run  int
}

func ratioKeys(rs []Ratio) []ratioKey {
	seen := map[ratioKey]bool{}
	var keys []ratioKey
	for _, r := range rs {
		k := ratioKey{r.Mode, r.Run}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b ratioKey) int {
		if c := strings.Compare(a.mode, b.mode); c != 0 {
			return c
		}
		return a.run - b.run
	})
	return keys
}

func ratioCell(r Ratio) string {
	if r.Switchyard == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f× (%s vs %s)", r.Ratio, ms(r.KubeProxy), ms(r.Switchyard))
}

// ms formats seconds as milliseconds.
func ms(s float64) string {
	if s == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", s*1000)
}
