package metrics

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	namespace = "switchyard"
	subsystem = "controlplane"
)

// Metrics holds the control plane's collectors.
type Metrics struct {
	// ConnectedAgents counts open discovery streams by rpc ("delta", "sotw").
	ConnectedAgents *prometheus.GaugeVec
	// ResponsesSent and BytesSent count discovery responses by rpc.
	ResponsesSent *prometheus.CounterVec
	BytesSent     *prometheus.CounterVec
	// AckLatency is the time from sending a response to its ACK, by rpc.
	AckLatency *prometheus.HistogramVec
	// Nacks counts responses agents rejected, by rpc.
	Nacks *prometheus.CounterVec
	// ComputeDuration is how long one recompute of node views takes.
	ComputeDuration prometheus.Histogram
	// InformerEvents counts API events by kind (Service, EndpointSlice,
	// Node) and type (add, update, delete).
	InformerEvents *prometheus.CounterVec
	// SkippedInput counts API objects skipped, or parts of them dropped or
	// clamped, while translating, by kind and reason.
	SkippedInput *prometheus.CounterVec
	// DeltaInitialResources counts, at the first batch of every delta
	// stream, the node view's resources by outcome: "resumed" (the agent
	// declared them at their current version in initial_resource_versions,
	// so they were not sent) or "sent". A reconnect that resumes adds mostly
	// to "resumed"; a full resend only to "sent".
	DeltaInitialResources *prometheus.CounterVec
	// NetworkProgrammingLatency is the fleet's programming latency as agents
	// report it in their ACKs: from an EndpointSlice's last-change trigger
	// time to the kernel change, kube-proxy's
	// network_programming_duration_seconds.
	NetworkProgrammingLatency prometheus.Histogram
	// AgentApplyDuration is the time agents report spending in the kernel.
	AgentApplyDuration prometheus.Histogram
	// UnknownNodeStreams is the number of open streams for names that are
	// not Nodes (stream.Strangers), UnknownNodeStreamsRefused the streams
	// refused because the bound was reached.
	UnknownNodeStreams        prometheus.Gauge
	UnknownNodeStreamsRefused prometheus.Counter
	// AgentsWithoutNode is the number of connected agents whose node has
	// no Node object (deleted, or not created yet): they keep their last
	// rules and receive no change.
	AgentsWithoutNode prometheus.Gauge
}

// programmingBuckets are kube-proxy's network programming latency buckets:
// 0.25s to 5 minutes.
func programmingBuckets() []float64 {
	b := prometheus.LinearBuckets(0.25, 0.25, 2)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		ConnectedAgents: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("connected_agents",
			"Node agents with an open discovery stream, by rpc.")), []string{"rpc"}),
		ResponsesSent: prometheus.NewCounterVec(prometheus.CounterOpts(opts("responses_sent_total",
			"Discovery responses sent to node agents, by rpc.")), []string{"rpc"}),
		BytesSent: prometheus.NewCounterVec(prometheus.CounterOpts(opts("response_bytes_sent_total",
			"Encoded bytes of discovery responses sent to node agents, by rpc.")), []string{"rpc"}),
		AckLatency: prometheus.NewHistogramVec(histogramOpts(opts("ack_latency_seconds",
			"Time from sending a discovery response to its ACK, by rpc."), prometheus.ExponentialBuckets(0.001, 2, 16)), []string{"rpc"}),
		Nacks: prometheus.NewCounterVec(prometheus.CounterOpts(opts("nacks_total",
			"Discovery responses rejected by node agents, by rpc.")), []string{"rpc"}),
		ComputeDuration: prometheus.NewHistogram(histogramOpts(opts("compute_duration_seconds",
			"Time to recompute node views after a change."), prometheus.ExponentialBuckets(0.0001, 2, 18))),
		InformerEvents: prometheus.NewCounterVec(prometheus.CounterOpts(opts("informer_events_total",
			"Kubernetes API events received, by kind and type.")), []string{"kind", "type"}),
		SkippedInput: prometheus.NewCounterVec(prometheus.CounterOpts(opts("skipped_input_total",
			"API objects skipped, or parts of them dropped or clamped, by kind and reason.")), []string{"kind", "reason"}),
		DeltaInitialResources: prometheus.NewCounterVec(prometheus.CounterOpts(opts("delta_initial_resources_total",
			"Resources of a node's view at the first batch of a delta stream, by outcome: resumed (the agent already had them, not sent) or sent.")), []string{"outcome"}),
		UnknownNodeStreams: prometheus.NewGauge(prometheus.GaugeOpts(opts("unknown_node_streams",
			"Open discovery streams for names the control plane has no Node for (bounded by --max-unknown-node-streams)."))),
		UnknownNodeStreamsRefused: prometheus.NewCounter(prometheus.CounterOpts(opts("unknown_node_streams_refused_total",
			"Discovery streams refused (ResourceExhausted) because --max-unknown-node-streams streams for names that are not Nodes were open."))),
		AgentsWithoutNode: prometheus.NewGauge(prometheus.GaugeOpts(opts("agents_without_node",
			"Connected node agents whose node has no Node object: they keep their last applied rules and receive no change until it exists."))),
		NetworkProgrammingLatency: prometheus.NewHistogram(histogramOpts(fleetOpts("network_programming_duration_seconds",
			"In-cluster network programming latency reported by node agents: the largest per ACK, from the trigger time of an EndpointSlice change (added or updated) to the kernel change."), programmingBuckets())),
		AgentApplyDuration: prometheus.NewHistogram(histogramOpts(fleetOpts("agent_apply_duration_seconds",
			"Time node agents report spending to program the kernel for one response."), prometheus.ExponentialBuckets(0.001, 2, 16))),
	}
	if err := registerAll(reg, "control plane",
		m.ConnectedAgents, m.ResponsesSent, m.BytesSent, m.AckLatency, m.Nacks,
		m.ComputeDuration, m.InformerEvents, m.SkippedInput, m.DeltaInitialResources,
		m.NetworkProgrammingLatency, m.AgentApplyDuration,
		m.UnknownNodeStreams, m.UnknownNodeStreamsRefused, m.AgentsWithoutNode,
	); err != nil {
		return nil, err
	}
	return m, nil
}

// opts names a control-plane metric switchyard_controlplane_<name>.
func opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}
}

// fleetOpts names a metric of what the agents report, switchyard_<name>:
// no subsystem, so that the name is kube-proxy's behind the prefix.
func fleetOpts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: namespace, Name: name, Help: help}
}

func histogramOpts(o prometheus.Opts, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: o.Namespace, Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, Buckets: buckets}
}

// registerAll registers every collector on reg and reports all that
// failed, as what's metrics.
func registerAll(reg prometheus.Registerer, what string, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("register %s metrics: %w", what, err)
	}
	return nil
}

// NodeMissing counts a stream whose node lost (true) or regained (false)
// its Node object, or that ended without one (false).
func (m *Metrics) NodeMissing(missing bool) {
	if m == nil {
		return
	}
	if missing {
		m.AgentsWithoutNode.Inc()
	} else {
		m.AgentsWithoutNode.Dec()
	}
}

// StrangerStreams sets the number of open streams for names that are not
// Nodes.
func (m *Metrics) StrangerStreams(open int) {
	if m != nil {
		m.UnknownNodeStreams.Set(float64(open))
	}
}

// StrangerRefused counts a stream refused because too many streams for
// names that are not Nodes are open.
func (m *Metrics) StrangerRefused() {
	if m != nil {
		m.UnknownNodeStreamsRefused.Inc()
	}
}

// StreamOpened counts an agent stream of kind rpc.
func (m *Metrics) StreamOpened(rpc string) {
	if m != nil {
		m.ConnectedAgents.WithLabelValues(rpc).Inc()
	}
}

// StreamClosed uncounts an agent stream of kind rpc.
func (m *Metrics) StreamClosed(rpc string) {
	if m != nil {
		m.ConnectedAgents.WithLabelValues(rpc).Dec()
	}
}

// ResponseSent counts one response of size bytes.
func (m *Metrics) ResponseSent(rpc string, bytes int) {
	if m != nil {
		m.ResponsesSent.WithLabelValues(rpc).Inc()
		m.BytesSent.WithLabelValues(rpc).Add(float64(bytes))
	}
}

// Acked observes the time from sending a response to its ACK.
func (m *Metrics) Acked(rpc string, latency time.Duration) {
	if m != nil {
		m.AckLatency.WithLabelValues(rpc).Observe(latency.Seconds())
	}
}

// Nacked counts a rejected response.
func (m *Metrics) Nacked(rpc string) {
	if m != nil {
		m.Nacks.WithLabelValues(rpc).Inc()
	}
}

// AgentApplied observes what an agent reported with an ACK; zero durations
// are not reported values and are skipped.
func (m *Metrics) AgentApplied(apply, programming time.Duration) {
	if m == nil {
		return
	}
	if apply > 0 {
		m.AgentApplyDuration.Observe(apply.Seconds())
	}
	if programming > 0 {
		m.NetworkProgrammingLatency.Observe(programming.Seconds())
	}
}

// DeltaStreamStarted counts a delta stream's first batch: resources the
// agent resumed with and resources sent.
func (m *Metrics) DeltaStreamStarted(resumed, sent int) {
	if m != nil {
		m.DeltaInitialResources.WithLabelValues("resumed").Add(float64(resumed))
		m.DeltaInitialResources.WithLabelValues("sent").Add(float64(sent))
	}
}

// ObserveCompute observes one recompute's duration.
func (m *Metrics) ObserveCompute(d time.Duration) {
	if m != nil {
		m.ComputeDuration.Observe(d.Seconds())
	}
}

// InformerEvent counts one API event of kind (Service, EndpointSlice, Node)
// and type (add, update, delete).
func (m *Metrics) InformerEvent(kind, typ string) {
	if m != nil {
		m.InformerEvents.WithLabelValues(kind, typ).Inc()
	}
}

// InputSkipped counts one skipped, dropped or clamped piece of API input.
func (m *Metrics) InputSkipped(kind, reason string) {
	if m != nil {
		m.SkippedInput.WithLabelValues(kind, reason).Inc()
	}
}
