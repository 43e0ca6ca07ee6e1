package admin

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Latency is each service's fleet programming latency since its latest
// change; *fleetlatency.Tracker implements it.
type Latency interface {
	Service(name string) (fleetlatency.Stats, bool)
}

var _ Latency = (*fleetlatency.Tracker)(nil)

// WithLatency has GetService report each service's fleet programming
// latency from l, and returns s.
func (s *Server) WithLatency(l Latency) *Server {
	s.latency = l
	return s
}

// addLatency fills resp's latency of service name, once a node has
// acknowledged its latest change, and its summary.
func (s *Server) addLatency(resp *switchyardv1.GetServiceResponse, name string) {
	var st fleetlatency.Stats
	if s.latency != nil {
		st, _ = s.latency.Service(name)
	}
	if st.Samples > 0 {
		resp.ProgrammingLatencyP50 = durationpb.New(st.Quantile(0.5))
		resp.ProgrammingLatencyP99 = durationpb.New(st.Quantile(0.99))
		resp.LatencySamples = uint32(st.Samples)
	}
	resp.Summary = serviceSummary(resp)
}

// serviceSummary is "live on 4998 of 5000 nodes (p50 310ms, p99 1.2s)",
// without the part in parentheses before any latency sample.
func serviceSummary(resp *switchyardv1.GetServiceResponse) string {
	nodes := "nodes"
	if resp.GetTotalNodes() == 1 {
		nodes = "node"
	}
	out := fmt.Sprintf("live on %d of %d %s", resp.GetAppliedNodes(), resp.GetTotalNodes(), nodes)
	if resp.GetLatencySamples() > 0 {
		out += fmt.Sprintf(" (p50 %s, p99 %s)",
			roughDuration(resp.GetProgrammingLatencyP50().AsDuration()),
			roughDuration(resp.GetProgrammingLatencyP99().AsDuration()))
	}
	return out
}

// roughDuration prints d to about two significant digits ("310ms",
// "1.2s", "2m10s", "17m0s"): the latencies are only that precise
// (package fleetlatency's buckets are 9% wide).
func roughDuration(d time.Duration) string {
	var unit time.Duration
	switch {
	case d <= 0:
		return "0s"
	case d >= 10*time.Minute:
		unit = time.Minute
	case d >= time.Minute:
		unit = 10 * time.Second
	default:
		unit = max(1, time.Duration(math.Pow10(int(math.Floor(math.Log10(float64(d))))-1)))
	}
	return d.Round(unit).String()
}
