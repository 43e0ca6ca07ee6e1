// Package metrics defines the control plane's Prometheus collectors and
// registers them on a Registerer passed in (no global registry).
//
// One Metrics value is shared: the discovery servers report through its
// Observer methods (connected agents, responses, bytes, ACK latency, NACKs,
// fleet programming latency), the compute side observes ComputeDuration and
// the watch side counts InformerEvents. Every method is safe on a nil
// *Metrics, which records nothing.
package metrics
