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
	// Run counts the repetitions of this size from 1 (Config.Runs).
	Run int `json:"run"`
	// Error says why nothing else was measured (ErrFirstSyncTimeout, or
	// skipped after one); empty for a measured run.
	Error            string  `json:"error,omitempty"`
	Services         int     `json:"services"`
	EndpointsPerSvc  int     `json:"endpointsPerService"`
	Proxy            string  `json:"proxy"`
	Mode             string  `json:"mode"`
	IptablesFlavour  string  `json:"iptablesFlavour,omitempty"`
	FirstSyncSeconds float64 `json:"firstSyncSeconds"`
	// FirstSyncSource says how FirstSyncSeconds was observed: SourceMetric
	// or SourceDump (see waitFirstSync).
	FirstSyncSource string `json:"firstSyncSource"`
	// FirstSyncMetricSeconds is the proxy's own view of its first sync:
	// kubeproxy_sync_proxy_rules_last_timestamp_seconds minus the start,
	// read once the rules are seen (a later sync would move it).
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
	// PollMedianSeconds is the median cost of one full rule dump in the
	// node namespace: the resolution of FirstSyncSeconds.
	PollMedianSeconds float64 `json:"pollMedianSeconds"`
	// ReadMedianSeconds is the median cost of one targeted read of the
	// changed service's rules: the resolution of Change times.
	ReadMedianSeconds float64 `json:"readMedianSeconds"`
	RSSBytes          uint64  `json:"rssBytes"`
	HWMBytes          uint64  `json:"hwmBytes"`
	// ControlPlaneRSSBytes / HWMBytes: Switchyard's control plane, which
	// serves every node (kube-proxy has no equivalent; it is per node).
	ControlPlaneRSSBytes uint64 `json:"controlPlaneRssBytes,omitempty"`
	ControlPlaneHWMBytes uint64 `json:"controlPlaneHwmBytes,omitempty"`
	// Churn is what the proxy spent under Config.Churn.
	Churn *ChurnResult `json:"churn,omitempty"`
	// DataPath is the traffic measured through the proxy (Config.DataPath).
	DataPath *DataPathResult `json:"dataPath,omitempty"`
}

// Name is "proxy/mode".
func (r Record) Name() string { return r.Proxy + "/" + r.Mode }

// Change is one EndpointSlice update and when its new endpoint was seen.
type Change struct {
	Service string  `json:"service"`
	NewIP   string  `json:"newIP"`
	Seconds float64 `json:"seconds"`
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
	// Summaries aggregate the runs of each size, proxy and mode; Ratios
	// compare their medians.
	Summaries []Summary `json:"summaries"`
	Ratios    []Ratio   `json:"ratios"`
	// DataPath summarises and compares the data-path records
	// (Config.DataPath).
	DataPath *DataPathReport `json:"dataPath,omitempty"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures at the
	// start and at the end of the run.
	LoadAverage []string `json:"loadAverage,omitempty"`
}

// Settings are the knobs a Report was measured with.
type Settings struct {
	Sizes                 []int     `json:"sizes"`
	EndpointsPerService   int       `json:"endpointsPerService"`
	Changes               int       `json:"changes"`
	KubeProxyModes        []string  `json:"kubeProxyModes"`
	SwitchyardModes       []string  `json:"switchyardModes"`
	MinSyncPeriodSeconds  float64   `json:"minSyncPeriodSeconds"`
	CoalesceWindowSeconds float64   `json:"coalesceWindowSeconds"`
	ChangeGapSeconds      float64   `json:"changeGapSeconds"`
	Runs                  int       `json:"runs"`
	BurnCPUs              int       `json:"burnCpus,omitempty"`
	SyncPacing            string    `json:"syncPacing,omitempty"`
	Churn                 *Churn    `json:"churn,omitempty"`
	DataPath              *DataPath `json:"dataPath,omitempty"`
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
	changes := fmt.Sprintf("%d EndpointSlice changes per run (min / median)", r.Settings.Changes)
	if dp := r.Settings.DataPath; dp != nil {
		changes = fmt.Sprintf("no changes: the data path instead, %d sampled services (also NodePort), %d connects per kind, "+
			"%d workers × %v of short connections, %v of bulk", dp.Samples, dp.Connects, dp.RateWorkers, dp.RateDuration, dp.BulkDuration)
	}
	fmt.Fprintf(&b, "Upstream kube-proxy %s vs Switchyard, one node namespace each, same kube-apiserver, "+
		"%d endpoints per service, %s. Host: %s. Total %.0f s.\n\n",
		r.KubeProxyVersion, r.Settings.EndpointsPerService, changes, r.Host, r.ElapsedSeconds)
	if r.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	}
	if r.Settings.BurnCPUs > 0 {
		fmt.Fprintf(&b, "Under load: %d CPU-burning threads of the harness ran beside each proxy throughout.\n\n", r.Settings.BurnCPUs)
	}
	b.WriteString("First sync: process start (Switchyard: control plane start) until every cluster IP is programmed: " +
		"the proxy's own last-sync timestamp when that first sync was its only one and a full dump right after holds every " +
		"cluster IP (marked m), else the first full dump that holds them all (marked d; the dump cost is its resolution). Change: EndpointSlice update " +
		"until a targeted read of the service's own chain (and the maps it refers to) holds the new endpoint " +
		"(read cost: its resolution). Programming metric: the proxy's own network_programming_duration_seconds.\n\n")
	b.WriteString("| services | run | proxy | first sync | change min | change median | programming metric (median) | dump / read cost | node RSS / peak | control plane RSS / peak |\n")
	b.WriteString("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rec := range r.Records {
		if rec.Error != "" {
			fmt.Fprintf(&b, "| %d | %d | %s | %s | | | | | | |\n", rec.Services, rec.Run, recordName(rec), rec.Error)
			continue
		}
		first := secs(rec.FirstSyncSeconds)
		if rec.FirstSyncSource != "" {
			first += " " + rec.FirstSyncSource[:1]
		}
		if rec.AgentSyncSeconds > 0 {
			first += fmt.Sprintf(" (cp ready %s + agent %s)", secs(rec.ControlPlaneReadySeconds), secs(rec.AgentSyncSeconds))
		}
		cp := "—"
		if rec.ControlPlaneRSSBytes > 0 {
			cp = fmt.Sprintf("%.0f / %.0f MiB", mibf(rec.ControlPlaneRSSBytes), mibf(rec.ControlPlaneHWMBytes))
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %s | %s | %s / %s | %.0f / %.0f MiB | %s |\n",
			rec.Services, rec.Run, recordName(rec), first, secs(rec.ChangeMinSeconds), secs(rec.ChangeMedianSeconds),
			secs(rec.ProgrammingMedianSeconds), secs(rec.PollMedianSeconds), secs(rec.ReadMedianSeconds),
			mibf(rec.RSSBytes), mibf(rec.HWMBytes), cp)
	}
	writeSummaries(&b, r.Summaries)
	if len(r.Ratios) > 0 {
		b.WriteString("\nRatios kube-proxy ÷ Switchyard (above 1: Switchyard faster or smaller):\n\n")
		b.WriteString("| services | baseline | switchyard | metric | kube-proxy | switchyard | ratio |\n|---:|---|---|---|---:|---:|---:|\n")
		for _, x := range r.Ratios {
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %.3g | %.3g | %.2f× |\n", x.Services, x.Baseline, x.Candidate, x.Metric, x.KubeProxy, x.Switchyard, x.Ratio)
		}
	}
	writeChurn(&b, r.Settings.Churn, r.Records)
	writeDataPath(&b, r.DataPath)
	if len(r.LoadAverage) > 0 {
		fmt.Fprintf(&b, "\nLoad average (1, 5, 15 min) at the start and the end: %s.\n", strings.Join(r.LoadAverage, " → "))
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
