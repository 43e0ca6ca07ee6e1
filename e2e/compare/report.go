package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Proxy names used in records.
const (
	ProxyKubeProxy  = "kube-proxy"
	ProxySwitchyard = "switchyard"
)

// Record is what one proxy in one mode measured for one cluster size.
// Durations are seconds; memory is bytes.
type Record struct {
	Services         int     `json:"services"`
	EndpointsPerSvc  int     `json:"endpointsPerService"`
	Proxy            string  `json:"proxy"`
	Mode             string  `json:"mode"`
	IptablesFlavour  string  `json:"iptablesFlavour,omitempty"`
	FirstSyncSeconds float64 `json:"firstSyncSeconds"`
	// FirstSyncMetricSeconds is kube-proxy's own view of its first sync:
	// kubeproxy_sync_proxy_rules_last_timestamp_seconds minus the start.
	FirstSyncMetricSeconds float64 `json:"firstSyncMetricSeconds,omitempty"`
	// ControlPlaneReadySeconds and AgentSyncSeconds split Switchyard's
	// FirstSyncSeconds: control plane start to /readyz, agent start to rules.
	ControlPlaneReadySeconds float64  `json:"controlPlaneReadySeconds,omitempty"`
	AgentSyncSeconds         float64  `json:"agentSyncSeconds,omitempty"`
	Changes                  []Change `json:"changes"`
	ChangeMinSeconds         float64  `json:"changeMinSeconds"`
	ChangeMedianSeconds      float64  `json:"changeMedianSeconds"`
	// ProgrammingMedianSeconds is the median of the per-change
	// kubeproxy_network_programming_duration_seconds observations (both
	// proxies export kube-proxy's histogram); 0 when none was attributable.
	ProgrammingMedianSeconds float64 `json:"programmingMedianSeconds,omitempty"`
	// PollMedianSeconds is the median cost of one rule dump in the node
	// namespace: the resolution of FirstSync and Change times.
	PollMedianSeconds float64 `json:"pollMedianSeconds"`
	RSSBytes          uint64  `json:"rssBytes"`
	HWMBytes          uint64  `json:"hwmBytes"`
	// ControlPlaneRSSBytes / HWMBytes: Switchyard's control plane, which
	// serves every node (kube-proxy has no equivalent; it is per node).
	ControlPlaneRSSBytes uint64 `json:"controlPlaneRssBytes,omitempty"`
	ControlPlaneHWMBytes uint64 `json:"controlPlaneHwmBytes,omitempty"`
}

// Name is "proxy/mode".
func (r Record) Name() string { return r.Proxy + "/" + r.Mode }

// Change is one EndpointSlice update and when its new endpoint was seen.
type Change struct {
	Service string  `json:"service"`
	NewIP   string  `json:"newIP"`
	Seconds float64 `json:"seconds"`
	// Source says how Seconds was observed: "monitor" (nft monitor event)
	// or "poll" (rule dumps; resolution PollMedianSeconds).
	Source string `json:"source"`
	// ProgrammingSeconds is the network-programming latency the proxy
	// reported for this change (histogram sum delta when exactly one
	// observation was added), 0 otherwise.
	ProgrammingSeconds float64 `json:"programmingSeconds,omitempty"`
}

// summarize fills the min/median fields from Changes.
func (r *Record) summarize() {
	var lat, prog []float64
	for _, c := range r.Changes {
		lat = append(lat, c.Seconds)
		if c.ProgrammingSeconds > 0 {
			prog = append(prog, c.ProgrammingSeconds)
		}
	}
	r.ChangeMinSeconds, r.ChangeMedianSeconds = minOf(lat), median(lat)
	r.ProgrammingMedianSeconds = median(prog)
}

// Ratio compares one kube-proxy mode with Switchyard for one size:
// KubeProxy ÷ Switchyard, so above 1 means Switchyard is faster or smaller.
type Ratio struct {
	Services   int     `json:"services"`
	Baseline   string  `json:"baseline"`
	Candidate  string  `json:"candidate"`
	Metric     string  `json:"metric"`
	KubeProxy  float64 `json:"kubeProxy"`
	Switchyard float64 `json:"switchyard"`
	Ratio      float64 `json:"ratio"`
}

// Report is the result of a Run.
type Report struct {
	Started          time.Time `json:"started"`
	ElapsedSeconds   float64   `json:"elapsedSeconds"`
	KubeProxyVersion string    `json:"kubeProxyVersion"`
	Command          string    `json:"command,omitempty"`
	Host             string    `json:"host"`
	Settings         Settings  `json:"settings"`
	Records          []Record  `json:"records"`
	Ratios           []Ratio   `json:"ratios"`
}

// Settings are the knobs a Report was measured with.
type Settings struct {
	Sizes                 []int    `json:"sizes"`
	EndpointsPerService   int      `json:"endpointsPerService"`
	Changes               int      `json:"changes"`
	KubeProxyModes        []string `json:"kubeProxyModes"`
	SwitchyardModes       []string `json:"switchyardModes"`
	MinSyncPeriodSeconds  float64  `json:"minSyncPeriodSeconds"`
	CoalesceWindowSeconds float64  `json:"coalesceWindowSeconds"`
	ChangeGapSeconds      float64  `json:"changeGapSeconds"`
}

// computeRatios compares every kube-proxy record with the Switchyard record
// of the same size.
func computeRatios(recs []Record) []Ratio {
	var out []Ratio
	for _, sy := range recs {
		if sy.Proxy != ProxySwitchyard {
			continue
		}
		for _, kp := range recs {
			if kp.Proxy != ProxyKubeProxy || kp.Services != sy.Services {
				continue
			}
			add := func(metric string, a, b float64) {
				r := Ratio{Services: sy.Services, Baseline: kp.Name(), Candidate: sy.Name(), Metric: metric, KubeProxy: a, Switchyard: b}
				if b > 0 {
					r.Ratio = a / b
				}
				out = append(out, r)
			}
			add("first sync (s)", kp.FirstSyncSeconds, sy.FirstSyncSeconds)
			add("change median (s)", kp.ChangeMedianSeconds, sy.ChangeMedianSeconds)
			add("change min (s)", kp.ChangeMinSeconds, sy.ChangeMinSeconds)
			add("node RSS (MiB)", mibf(kp.RSSBytes), mibf(sy.RSSBytes))
			add("node peak RSS (MiB)", mibf(kp.HWMBytes), mibf(sy.HWMBytes))
		}
	}
	return out
}

// WriteJSON writes the report, indented.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteMarkdown writes the measurements and the ratios as two tables.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Upstream kube-proxy %s vs Switchyard, one node namespace each, same kube-apiserver, "+
		"%d endpoints per service, %d EndpointSlice changes per run (min / median). Host: %s. Total %.0f s.\n\n",
		r.KubeProxyVersion, r.Settings.EndpointsPerService, r.Settings.Changes, r.Host, r.ElapsedSeconds)
	if r.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	}
	b.WriteString("First sync: process start (Switchyard: control plane start) until a dump holds every cluster IP; " +
		"poll cost is one dump, its resolution. Change: EndpointSlice update until `nft monitor` in the node " +
		"namespace sees the new endpoint's rule committed. Programming metric: the proxy's own " +
		"network_programming_duration_seconds for that change.\n\n")
	b.WriteString("| services | proxy | first sync | change min | change median | programming metric (median) | poll cost | node RSS / peak | control plane RSS / peak |\n")
	b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rec := range r.Records {
		first := secs(rec.FirstSyncSeconds)
		if rec.AgentSyncSeconds > 0 {
			first += fmt.Sprintf(" (cp ready %s + agent %s)", secs(rec.ControlPlaneReadySeconds), secs(rec.AgentSyncSeconds))
		}
		cp := "—"
		if rec.ControlPlaneRSSBytes > 0 {
			cp = fmt.Sprintf("%.0f / %.0f MiB", mibf(rec.ControlPlaneRSSBytes), mibf(rec.ControlPlaneHWMBytes))
		}
		name := rec.Name()
		if rec.IptablesFlavour != "" {
			name += " (" + rec.IptablesFlavour + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %.0f / %.0f MiB | %s |\n",
			rec.Services, name, first, secs(rec.ChangeMinSeconds), secs(rec.ChangeMedianSeconds),
			secs(rec.ProgrammingMedianSeconds), secs(rec.PollMedianSeconds),
			mibf(rec.RSSBytes), mibf(rec.HWMBytes), cp)
	}
	if len(r.Ratios) > 0 {
		b.WriteString("\nRatios kube-proxy ÷ Switchyard (above 1: Switchyard faster or smaller):\n\n")
		b.WriteString("| services | baseline | switchyard | metric | kube-proxy | switchyard | ratio |\n|---:|---|---|---|---:|---:|---:|\n")
		for _, x := range r.Ratios {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %.3g | %.3g | %.2f× |\n", x.Services, x.Baseline, x.Candidate, x.Metric, x.KubeProxy, x.Switchyard, x.Ratio)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func secs(s float64) string {
	switch {
	case s == 0:
		return "—"
	case s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}

func mibf(b uint64) float64 { return float64(b) / (1 << 20) }

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Min(xs)
}

// median of xs (the mean of the middle two for an even count); 0 if empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// seconds converts a duration to float seconds rounded to the microsecond.
func seconds(d time.Duration) float64 { return math.Round(d.Seconds()*1e6) / 1e6 }
