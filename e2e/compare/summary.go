package compare

import (
	"fmt"
	"strings"
)

// Summary aggregates the runs of one size, proxy and mode. First-sync
// figures are over runs (one first sync each); change figures over every
// change of every run; memory is the median RSS and the largest peak.
type Summary struct {
	Services int    `json:"services"`
	Proxy    string `json:"proxy"`
	Mode     string `json:"mode"`
	Runs     int    `json:"runs"`
	// Failed counts the runs with an Error (not in any figure here);
	// Error is the first of them.
	Failed                   int     `json:"failed,omitempty"`
	Error                    string  `json:"error,omitempty"`
	FirstSyncMinSeconds      float64 `json:"firstSyncMinSeconds"`
	FirstSyncMedianSeconds   float64 `json:"firstSyncMedianSeconds"`
	AgentSyncMedianSeconds   float64 `json:"agentSyncMedianSeconds,omitempty"`
	Changes                  int     `json:"changes"`
	ChangeMinSeconds         float64 `json:"changeMinSeconds"`
	ChangeMedianSeconds      float64 `json:"changeMedianSeconds"`
	ProgrammingMedianSeconds float64 `json:"programmingMedianSeconds,omitempty"`
	ReadMedianSeconds        float64 `json:"readMedianSeconds"`
	RSSMedianBytes           uint64  `json:"rssMedianBytes"`
	HWMMaxBytes              uint64  `json:"hwmMaxBytes"`
	ControlPlaneHWMMaxBytes  uint64  `json:"controlPlaneHwmMaxBytes,omitempty"`
}

// Name is "proxy/mode".
func (s Summary) Name() string { return s.Proxy + "/" + s.Mode }

// summarizeRuns groups recs by size, proxy and mode, in first-seen order.
func summarizeRuns(recs []Record) []Summary {
	type key struct {
		services    int
		proxy, mode string
	}
	var order []key
	groups := map[key][]Record{}
	for _, r := range recs {
		k := key{r.Services, r.Proxy, r.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		out = append(out, summarize(groups[k]))
	}
	return out
}

func summarize(runs []Record) Summary {
	s := Summary{Services: runs[0].Services, Proxy: runs[0].Proxy, Mode: runs[0].Mode}
	var first, agent, change, prog, reads, rss []float64
	for _, r := range runs {
		if r.Error != "" {
			if s.Failed++; s.Error == "" {
				s.Error = r.Error
			}
			continue
		}
		s.Runs++
		first = append(first, r.FirstSyncSeconds)
		if r.AgentSyncSeconds > 0 {
			agent = append(agent, r.AgentSyncSeconds)
		}
		for _, c := range r.Changes {
			change = append(change, c.Seconds)
			if c.ProgrammingSeconds > 0 {
				prog = append(prog, c.ProgrammingSeconds)
			}
		}
		reads = append(reads, r.ReadMedianSeconds)
		rss = append(rss, float64(r.RSSBytes))
		s.HWMMaxBytes = max(s.HWMMaxBytes, r.HWMBytes)
		s.ControlPlaneHWMMaxBytes = max(s.ControlPlaneHWMMaxBytes, r.ControlPlaneHWMBytes)
	}
	s.FirstSyncMinSeconds, s.FirstSyncMedianSeconds = minOf(first), median(first)
	s.AgentSyncMedianSeconds = median(agent)
	s.Changes = len(change)
	s.ChangeMinSeconds, s.ChangeMedianSeconds = minOf(change), median(change)
	s.ProgrammingMedianSeconds = median(prog)
	s.ReadMedianSeconds = median(reads)
	s.RSSMedianBytes = uint64(median(rss))
	return s
}

// computeRatios compares every kube-proxy summary with each Switchyard
// summary of the same size.
func computeRatios(sums []Summary) []Ratio {
	var out []Ratio
	for _, sy := range sums {
		if sy.Proxy != ProxySwitchyard {
			continue
		}
		for _, kp := range sums {
			if kp.Proxy != ProxyKubeProxy || kp.Services != sy.Services || kp.Runs == 0 || sy.Runs == 0 {
				continue
			}
			add := func(metric string, a, b float64) {
				if a == 0 && b == 0 {
					return // not measured (no changes in a data-path run)
				}
				r := Ratio{Services: sy.Services, Baseline: kp.Name(), Candidate: sy.Name(), Metric: metric, KubeProxy: a, Switchyard: b}
				if b > 0 {
					r.Ratio = a / b
				}
				out = append(out, r)
			}
			add("first sync median (s)", kp.FirstSyncMedianSeconds, sy.FirstSyncMedianSeconds)
			add("first sync min (s)", kp.FirstSyncMinSeconds, sy.FirstSyncMinSeconds)
			add("change median (s)", kp.ChangeMedianSeconds, sy.ChangeMedianSeconds)
			add("change min (s)", kp.ChangeMinSeconds, sy.ChangeMinSeconds)
			add("node RSS median (MiB)", mibf(kp.RSSMedianBytes), mibf(sy.RSSMedianBytes))
			add("node peak RSS (MiB)", mibf(kp.HWMMaxBytes), mibf(sy.HWMMaxBytes))
		}
	}
	return out
}

// writeSummaries adds the per-size summary table.
func writeSummaries(b *strings.Builder, sums []Summary) {
	if len(sums) == 0 {
		return
	}
	b.WriteString("\nSummary over runs (first sync min / median over runs; changes over every change of every run):\n\n")
	b.WriteString("| services | proxy | runs | first sync min / median | agent share (median) | changes | change min / median | programming metric (median) | read cost | node RSS median / peak |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sums {
		if s.Runs == 0 {
			fmt.Fprintf(b, "| %d | %s | 0 of %d | %s | | | | | | |\n", s.Services, s.Name(), s.Failed, s.Error)
			continue
		}
		fmt.Fprintf(b, "| %d | %s | %d | %s / %s | %s | %d | %s / %s | %s | %s | %.0f / %.0f MiB |\n",
			s.Services, s.Name(), s.Runs, secs(s.FirstSyncMinSeconds), secs(s.FirstSyncMedianSeconds),
			secs(s.AgentSyncMedianSeconds), s.Changes, secs(s.ChangeMinSeconds), secs(s.ChangeMedianSeconds),
			secs(s.ProgrammingMedianSeconds), secs(s.ReadMedianSeconds), mibf(s.RSSMedianBytes), mibf(s.HWMMaxBytes))
	}
}

// recordName is the record's proxy/mode with the iptables flavour.
func recordName(r Record) string {
	name := r.Name()
	if r.IptablesFlavour != "" {
		name += " (" + strings.TrimPrefix(r.IptablesFlavour, "iptables ") + ")"
	}
	return name
}
