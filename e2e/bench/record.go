package bench

import (
	"slices"
	"time"
)

// Record is one run's measurements; the harness writes one JSON object per
// run. Fields that do not apply to a kind are zero.
type Record struct {
	Kind string `json:"kind"` // "fanout" or "apiload"
	// Path is how changes reach the control plane: "apiserver" (path a,
	// through kube-apiserver and etcd) or "fake" (path b, an in-memory
	// clientset inside the control-plane process).
	Path      string    `json:"path,omitempty"`
	Mode      string    `json:"mode,omitempty"` // "delta" or "sotw"
	Agents    int       `json:"agents"`
	Services  int       `json:"services"`
	Endpoints int       `json:"endpointsPerService"`
	Rep       int       `json:"rep"`
	Started   time.Time `json:"started"`
	LoadAvg   string    `json:"loadAvg"` // /proc/loadavg when the run started

	CoalesceMS   float64 `json:"coalesceWindowMs,omitempty"`
	ApplyDelayMS float64 `json:"applyDelayMs,omitempty"`
	Changes      int     `json:"changes,omitempty"`

	// Initial sync: first agent dials → every agent ACKed its first view.
	InitialSyncMS        float64 `json:"initialSyncMs,omitempty"`
	InitialBytesPerAgent int64   `json:"initialBytesPerAgent,omitempty"`

	// Per change, over every (agent, change): change written → that agent
	// sent its ACK of the batch carrying it.
	LatencyP50MS float64 `json:"latencyP50Ms,omitempty"`
	LatencyP99MS float64 `json:"latencyP99Ms,omitempty"`
	LatencyMaxMS float64 `json:"latencyMaxMs,omitempty"`
	// AllAckedMS: per change, until the last agent ACKed; median of changes.
	AllAckedMS float64 `json:"allAckedMedianMs,omitempty"`
	// BytesPerChange: wire bytes (proto.Size) received by all agents for
	// one change; median of changes.
	BytesPerChange      int64   `json:"bytesPerChange,omitempty"`
	ResponsesPerChange  float64 `json:"responsesPerChange,omitempty"`
	BytesPerAgentChange float64 `json:"bytesPerAgentPerChange,omitempty"`

	// Control-plane process (its own process on both paths; on path b the
	// fake clientset's object store lives in it too).
	CPUInitialSec   float64 `json:"cpCpuInitialSec,omitempty"`   // start → all agents synced
	CPUPerChangeSec float64 `json:"cpCpuPerChangeSec,omitempty"` // change phase / changes
	PeakRSS         uint64  `json:"cpPeakRssBytes,omitempty"`    // VmHWM, start → synced
	ChangePeakRSS   uint64  `json:"cpChangePeakRssBytes,omitempty"`
	HeapInuse       uint64  `json:"cpHeapInuseBytes,omitempty"` // after the changes
	HarnessPeakRSS  uint64  `json:"harnessPeakRssBytes,omitempty"`

	// API load (kind apiload): what the API server serves for one setup.
	Setup           string  `json:"setup,omitempty"` // "switchyard", "kube-proxy-informers", "kube-proxy"
	Watchers        float64 `json:"registeredWatchers,omitempty"`
	LongRunning     float64 `json:"longrunningWatches,omitempty"`
	APIServerRSS    uint64  `json:"apiserverRssBytes,omitempty"`
	APIServerCPUSec float64 `json:"apiserverCpuSec,omitempty"` // during the settle window
	Note            string  `json:"note,omitempty"`
}

// percentile returns the p-th percentile (0 < p <= 1) of sorted xs, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
