package compare

import (
	"fmt"
	"os"
	"strings"
)

// DataPathReport summarises the data-path records of a run over runs and
// compares them.
type DataPathReport struct {
	Summaries []DataPathSummary `json:"summaries"`
	// VsKubeProxy compares each Switchyard mode with kube-proxy's same
	// mode, VsFloor every proxy with the no-proxy baseline, per size.
	VsKubeProxy []DataPathRatio `json:"vsKubeProxy"`
	VsFloor     []DataPathRatio `json:"vsFloor"`
}

// DataPathSummary is one size, proxy and mode over its runs.
type DataPathSummary struct {
	Services int    `json:"services"`
	Proxy    string `json:"proxy"`
	Mode     string `json:"mode"`
	Runs     int    `json:"runs"`
	// FailedConnects counts failed connects over every run and
	// measurement (the targets were all reachable before measuring).
	FailedConnects int64           `json:"failedConnects"`
	Metrics        []MetricSummary `json:"metrics"`
}

// Name is "proxy/mode".
func (s DataPathSummary) Name() string { return s.Proxy + "/" + s.Mode }

// MetricSummary is one figure over runs: each run gives one value (a
// percentile of that run's connects, its rate, its throughput).
type MetricSummary struct {
	Name         string  `json:"name"`
	HigherBetter bool    `json:"higherBetter,omitempty"`
	Min          float64 `json:"min"`
	Median       float64 `json:"median"`
	Max          float64 `json:"max"`
}

// best is the best run's value: Max where higher is better, else Min.
func (m MetricSummary) best() float64 {
	if m.HigherBetter {
		return m.Max
	}
	return m.Min
}

// DataPathRatio compares the medians of one metric of two summaries of
// one size. Against kube-proxy (DataPathReport.VsKubeProxy) Ratio is
// above 1 when Candidate is better (lower latency or CPU, more
// connections or throughput); against the floor (VsFloor, latencies
// only) it is Candidate ÷ floor, how many times the floor.
type DataPathRatio struct {
	Services  int     `json:"services"`
	Baseline  string  `json:"baseline"`
	Candidate string  `json:"candidate"`
	Metric    string  `json:"metric"`
	Base      float64 `json:"base"`
	Cand      float64 `json:"candidateValue"`
	Ratio     float64 `json:"ratio"`
}

// dataPathMetrics are the figures taken from each run, in table order.
var dataPathMetrics = []struct {
	name         string
	higherBetter bool
	get          func(*DataPathResult) float64
}{
	{"ClusterIP p50 µs", false, func(d *DataPathResult) float64 { return d.ClusterIP.P50 }},
	{"ClusterIP p90 µs", false, func(d *DataPathResult) float64 { return d.ClusterIP.P90 }},
	{"ClusterIP p99 µs", false, func(d *DataPathResult) float64 { return d.ClusterIP.P99 }},
	{"NodePort p50 µs", false, func(d *DataPathResult) float64 { return d.NodePort.P50 }},
	{"NodePort p90 µs", false, func(d *DataPathResult) float64 { return d.NodePort.P90 }},
	{"NodePort p99 µs", false, func(d *DataPathResult) float64 { return d.NodePort.P99 }},
	{"new conn/s", true, func(d *DataPathResult) float64 { return d.Rate.PerSecond }},
	{"CPU µs/conn", false, func(d *DataPathResult) float64 { return d.Rate.CPUMicrosPerConn }},
	{"bulk Gbit/s", true, func(d *DataPathResult) float64 { return d.Bulk.BitsPerSecond / 1e9 }},
}

// summarizeDataPath groups the records that carry a data path by size,
// proxy and mode (first-seen order) and compares them.
func summarizeDataPath(recs []Record) *DataPathReport {
	type key struct {
		services    int
		proxy, mode string
	}
	var order []key
	groups := map[key][]*DataPathResult{}
	for _, r := range recs {
		if r.DataPath == nil {
			continue
		}
		k := key{r.Services, r.Proxy, r.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r.DataPath)
	}
	rep := &DataPathReport{}
	for _, k := range order {
		s := DataPathSummary{Services: k.services, Proxy: k.proxy, Mode: k.mode, Runs: len(groups[k])}
		for _, m := range dataPathMetrics {
			var xs []float64
			for _, d := range groups[k] {
				xs = append(xs, m.get(d))
			}
			s.Metrics = append(s.Metrics, MetricSummary{Name: m.name, HigherBetter: m.higherBetter,
				Min: minOf(xs), Median: median(xs), Max: maxOf(xs)})
		}
		for _, d := range groups[k] {
			s.FailedConnects += int64(d.ClusterIP.Failed+d.NodePort.Failed) + d.Rate.Failed
		}
		rep.Summaries = append(rep.Summaries, s)
	}
	rep.VsKubeProxy, rep.VsFloor = dataPathRatios(rep.Summaries)
	return rep
}

// dataPathRatios compares each Switchyard mode with kube-proxy's same
// mode of the same size (above 1: Switchyard better), and every proxy's
// latencies with the floor's (times the floor).
func dataPathRatios(sums []DataPathSummary) (vsKP, vsFloor []DataPathRatio) {
	find := func(services int, proxy, mode string) *DataPathSummary {
		for i := range sums {
			if s := &sums[i]; s.Services == services && s.Proxy == proxy && s.Mode == mode {
				return s
			}
		}
		return nil
	}
	for _, s := range sums {
		if kp := find(s.Services, ProxyKubeProxy, s.Mode); s.Proxy == ProxySwitchyard && kp != nil {
			for i, m := range s.Metrics {
				base := kp.Metrics[i].Median
				r := DataPathRatio{Services: s.Services, Baseline: kp.Name(), Candidate: s.Name(), Metric: m.Name, Base: base, Cand: m.Median}
				r.Ratio = betterRatio(base, m.Median, m.HigherBetter)
				vsKP = append(vsKP, r)
			}
		}
		floor := find(s.Services, ProxyNone, ModeDirect)
		if floor == nil || s.Proxy == ProxyNone {
			continue
		}
		for i, m := range s.Metrics {
			if m.HigherBetter || m.Name == "CPU µs/conn" {
				continue
			}
			base := floor.Metrics[i].Median
			r := DataPathRatio{Services: s.Services, Baseline: floor.Name(), Candidate: s.Name(), Metric: m.Name, Base: base, Cand: m.Median}
			if base > 0 {
				r.Ratio = m.Median / base
			}
			vsFloor = append(vsFloor, r)
		}
	}
	return vsKP, vsFloor
}

// betterRatio is how many times better cand is than base: base ÷ cand
// for a cost, cand ÷ base for a rate; 0 when undefined.
func betterRatio(base, cand float64, higherBetter bool) float64 {
	if higherBetter {
		base, cand = cand, base
	}
	if cand <= 0 {
		return 0
	}
	return base / cand
}

// writeDataPath adds the data-path tables.
func writeDataPath(b *strings.Builder, r *DataPathReport) {
	if r == nil || len(r.Summaries) == 0 {
		return
	}
	b.WriteString("\nData path, over runs: each cell is the best run / the median run (latencies and CPU: min / median; " +
		"rates: max / median). Connect = connect() from the client namespace behind the node (PREROUTING), SYN until the SYN-ACK " +
		"returns it; none/direct dials the pod itself (the floor). CPU per connection is the whole machine's busy time over the " +
		"new-connection run ÷ its connections (client, node and sink alike).\n\n")
	b.WriteString("| services | proxy | runs | failed |")
	for _, m := range dataPathMetrics {
		b.WriteString(" " + m.name + " |")
	}
	b.WriteString("\n|---:|---|---:|---:|" + strings.Repeat("---:|", len(dataPathMetrics)) + "\n")
	for _, s := range r.Summaries {
		fmt.Fprintf(b, "| %d | %s | %d | %d |", s.Services, s.Name(), s.Runs, s.FailedConnects)
		for _, m := range s.Metrics {
			fmt.Fprintf(b, " %s / %s |", num(m.best()), num(m.Median))
		}
		b.WriteString("\n")
	}
	writeRatioGrid(b, "\nSwitchyard vs kube-proxy's same mode, same run (medians; above 1: Switchyard better):\n\n", r.VsKubeProxy)
	writeRatioGrid(b, "\nLatency medians ÷ the no-proxy floor of the same run (1 = the floor):\n\n", r.VsFloor)
}

// writeRatioGrid writes ratios as one row per size and pair, one column
// per metric.
func writeRatioGrid(b *strings.Builder, title string, rs []DataPathRatio) {
	if len(rs) == 0 {
		return
	}
	var metrics []string
	seen := map[string]bool{}
	for _, x := range rs {
		if !seen[x.Metric] {
			seen[x.Metric] = true
			metrics = append(metrics, x.Metric)
		}
	}
	b.WriteString(title)
	b.WriteString("| services | proxy | vs | " + strings.Join(metrics, " | ") + " |\n")
	b.WriteString("|---:|---|---|" + strings.Repeat("---:|", len(metrics)) + "\n")
	type row struct {
		services  int
		cand, bas string
	}
	cells := map[row]map[string]float64{}
	var rows []row
	for _, x := range rs {
		k := row{x.Services, x.Candidate, x.Baseline}
		if cells[k] == nil {
			cells[k] = map[string]float64{}
			rows = append(rows, k)
		}
		cells[k][x.Metric] = x.Ratio
	}
	for _, k := range rows {
		fmt.Fprintf(b, "| %d | %s | %s |", k.services, k.cand, k.bas)
		for _, m := range metrics {
			fmt.Fprintf(b, " %.2f× |", cells[k][m])
		}
		b.WriteString("\n")
	}
}

// num prints a figure with three significant digits, thousands whole.
func num(x float64) string {
	if x >= 1000 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// loadAverage is /proc/loadavg's first three fields: the machine is
// shared, and a benchmark reports what else ran.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
