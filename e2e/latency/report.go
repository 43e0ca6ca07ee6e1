package latency

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
)

// Directions of a scale event.
const (
	Up   = "up"   // one replica more: measured until every node's rules hold the new pod
	Down = "down" // one replica less: until no node's rules hold the deleted pod
)

// NodeResult is one node's side of one event. Times are seconds.
type NodeResult struct {
	Node string `json:"node"`
	// Seconds runs from the event's start (the harness's pod watch seeing
	// Ready for Up, deletionTimestamp for Down) to the end of the first
	// read of the node's rules that held the pod's address (Up) or no
	// longer did (Down): an upper bound, late by at most Resolution.
	Seconds float64 `json:"seconds"`
	// FromSliceSeconds starts instead when the harness's EndpointSlice
	// watch saw the endpoint ready (Up) or no longer ready (Down): the
	// same moment the proxies' own watches see it, give or take.
	FromSliceSeconds float64 `json:"fromSliceSeconds"`
	// FromTransitionSeconds (Up) starts at the Ready condition's
	// lastTransitionTime, truncated to the second as the API stores it:
	// the start kube-proxy's histogram uses (the slice's trigger time).
	FromTransitionSeconds float64 `json:"fromTransitionSeconds,omitempty"`
	// ResolutionSeconds is from the start of the last read that did not
	// see the change to the end of the first that did.
	ResolutionSeconds float64 `json:"resolutionSeconds"`
	Reads             int     `json:"reads"`
	// FirstRead: the first read already saw the change, so the change
	// happened before the poll began and Seconds is only an upper bound.
	FirstRead bool `json:"firstRead,omitempty"`
	// MetricCount and MetricSum are what the proxy on this node added to
	// its network-programming histogram from the start to the end of the
	// event's settling gap; MetricSeconds is that one value when exactly
	// one observation was added and it was certainly made after the
	// "before" scrape (attributable to this event).
	MetricCount   float64 `json:"metricCount"`
	MetricSum     float64 `json:"metricSum"`
	MetricSeconds float64 `json:"metricSeconds,omitempty"`
}

// Event is one scale event.
type Event struct {
	Index     int    `json:"index"`
	Direction string `json:"direction"`
	Replicas  int    `json:"replicas"` // after the event
	Pod       string `json:"pod"`
	PodIP     string `json:"podIP"`
	PodNode   string `json:"podNode"`
	// ActionToStartSeconds is from the scale call to the event's start.
	ActionToStartSeconds float64 `json:"actionToStartSeconds"`
	// SliceAfterStartSeconds is from the start to the slice change the
	// harness saw (the EndpointSlice controller's share).
	SliceAfterStartSeconds float64 `json:"sliceAfterStartSeconds"`
	// Seconds and FromSliceSeconds are the slowest node's: the time until
	// every node had it.
	Seconds          float64      `json:"seconds"`
	FromSliceSeconds float64      `json:"fromSliceSeconds"`
	Nodes            []NodeResult `json:"nodes"`
}

// Stats summarize latencies (seconds): nearest-rank percentiles.
type Stats struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// MetricSummary is the proxies' own histogram beside the harness's view.
type MetricSummary struct {
	// Observations is every observation the proxies added during the
	// events (from the scrape before the first to the one after the
	// last, scale-ups' not-ready syncs included), on every node; Mean
	// their mean; P50Estimate and P99Estimate
	// interpolate in the buckets (coarse: 0.25, 0.5, 1, 2, 3 … s).
	Observations float64 `json:"observations"`
	Mean         float64 `json:"mean"`
	P50Estimate  float64 `json:"p50Estimate"`
	P99Estimate  float64 `json:"p99Estimate"`
	// Attributed are the node-events of scale-ups with one attributable
	// observation (NodeResult.MetricSeconds): its value, and the
	// harness's time for the same node-events measured from the same
	// start (FromTransitionSeconds).
	Attributed Stats `json:"attributed"`
	Harness    Stats `json:"harness"`
}

// Record is one proxy's measurement on one bed.
type Record struct {
	Proxy   string    `json:"proxy"` // "switchyard-iptables"
	Kind    string    `json:"kind"`
	Mode    string    `json:"mode"`
	Run     int       `json:"run"`
	Nodes   int       `json:"nodes"`
	Started time.Time `json:"started"`
	Events  []Event   `json:"events"`
	Err     string    `json:"error,omitempty"`
	// All, Up and Down are over events (the slowest node of each);
	// FromSlice over every event from the slice's change; PerNode over
	// every node of every event.
	All       Stats         `json:"all"`
	Up        Stats         `json:"up"`
	Down      Stats         `json:"down"`
	FromSlice Stats         `json:"fromSlice"`
	PerNode   Stats         `json:"perNode"`
	Metric    MetricSummary `json:"metric"`
	// ReadMedianSeconds is the median cost of one read of a node's rules;
	// ResolutionMedianSeconds the median of the nodes' resolutions.
	ReadMedianSeconds       float64 `json:"readMedianSeconds"`
	ResolutionMedianSeconds float64 `json:"resolutionMedianSeconds"`
	FirstReads              int     `json:"firstReads"`
	BedSeconds              float64 `json:"bedSeconds,omitempty"`
}

// summarize fills the statistics from Events; runHist is every
// observation the proxies made over the events.
func (r *Record) summarize(runHist histogram, reads []float64) {
	var all, up, down, slice, perNode, res, metric, harness []float64
	r.FirstReads = 0
	for _, e := range r.Events {
		all = append(all, e.Seconds)
		slice = append(slice, e.FromSliceSeconds)
		if e.Direction == Up {
			up = append(up, e.Seconds)
		} else {
			down = append(down, e.Seconds)
		}
		for _, n := range e.Nodes {
			perNode = append(perNode, n.Seconds)
			res = append(res, n.ResolutionSeconds)
			if n.FirstRead {
				r.FirstReads++
			}
			if e.Direction == Up && n.MetricSeconds > 0 {
				metric = append(metric, n.MetricSeconds)
				harness = append(harness, n.FromTransitionSeconds)
			}
		}
	}
	r.All, r.Up, r.Down, r.FromSlice, r.PerNode = stats(all), stats(up), stats(down), stats(slice), stats(perNode)
	r.ResolutionMedianSeconds = stats(res).P50
	r.ReadMedianSeconds = stats(reads).P50
	r.Metric = MetricSummary{Observations: runHist.Count, P50Estimate: round(runHist.quantile(0.5)),
		P99Estimate: round(runHist.quantile(0.99)), Attributed: stats(metric), Harness: stats(harness)}
	if runHist.Count > 0 {
		r.Metric.Mean = round(runHist.Sum / runHist.Count)
	}
}

// stats computes nearest-rank percentiles: the p-th is the smallest value
// with at least p% of the values at or below it (the 99th of 100 events
// is the second slowest).
func stats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Sorted(slices.Values(xs))
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return Stats{N: len(s), Min: round(s[0]), P50: round(rank(50)), P99: round(rank(99)), Max: round(s[len(s)-1])}
}

// round keeps microseconds: enough for latencies read at millisecond
// resolution, and stable JSON.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func seconds(d time.Duration) float64 { return round(d.Seconds()) }

// Ratio is kube-proxy ÷ Switchyard for one mode and statistic in one run:
// above 1, Switchyard programmed faster.
type Ratio struct {
	Run        int     `json:"run"`
	Mode       string  `json:"mode"`
	Stat       string  `json:"stat"`
	KubeProxy  float64 `json:"kubeProxy"`
	Switchyard float64 `json:"switchyard"`
	Ratio      float64 `json:"ratio"`
}

// Settings are the knobs a report was measured with.
type Settings struct {
	Proxies           []string `json:"proxies"`
	Runs              int      `json:"runs"`
	Events            int      `json:"events"`
	Nodes             int      `json:"nodes"`
	BaseReplicas      int      `json:"baseReplicas"`
	GapSeconds        float64  `json:"gapSeconds"`
	ReadyDelaySeconds float64  `json:"readyDelaySeconds"`
	ReadPauseSeconds  float64  `json:"readPauseSeconds"`
	Overlay           string   `json:"overlay"`
}

// Report is a whole measurement: every proxy, every run.
type Report struct {
	Started        time.Time         `json:"started"`
	ElapsedSeconds float64           `json:"elapsedSeconds"`
	Command        string            `json:"command"`
	Host           string            `json:"host"`
	Versions       map[string]string `json:"versions"`
	Settings       Settings          `json:"settings"`
	Records        []Record          `json:"records"`
	Ratios         []Ratio           `json:"ratios"`
}

// ComputeRatios compares, run by run, each kube-proxy record with the
// Switchyard record of the same mode.
func (rep *Report) ComputeRatios() {
	rep.Ratios = nil
	for _, kp := range rep.Records {
		if kp.Kind != cluster.KindKubeProxy || kp.All.N == 0 {
			continue
		}
		for _, sy := range rep.Records {
			if sy.Kind != cluster.KindSwitchyard || sy.Mode != kp.Mode || sy.Run != kp.Run || sy.All.N == 0 {
				continue
			}
			for _, st := range []struct {
				name   string
				kp, sy float64
			}{{"p50", kp.All.P50, sy.All.P50}, {"p99", kp.All.P99, sy.All.P99}, {"max", kp.All.Max, sy.All.Max}} {
				r := Ratio{Run: kp.Run, Mode: kp.Mode, Stat: st.name, KubeProxy: st.kp, Switchyard: st.sy}
				if st.sy > 0 {
					r.Ratio = math.Round(st.kp/st.sy*100) / 100
				}
				rep.Ratios = append(rep.Ratios, r)
			}
		}
	}
}

// WriteJSON writes the report to path.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
