package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the agent's collectors.
type Metrics struct {
	reg *prometheus.Registry

	syncDuration        prometheus.Histogram
	syncFullDuration    prometheus.Histogram
	syncPartialDuration prometheus.Histogram
	lastSync            prometheus.Gauge
	lastQueued          prometheus.Gauge
	programming         prometheus.Histogram
	endpointChanges     prometheus.Counter
	serviceChanges      prometheus.Counter
	appliedVersion      *prometheus.GaugeVec
	appliedResources    prometheus.Gauge
	syncErrors          prometheus.Counter
	nacks               prometheus.Counter
	connected           *prometheus.GaugeVec
	modeSwitches        prometheus.Counter
	stateRejections     *prometheus.CounterVec
	stateWriteErrors    prometheus.Counter
	driftChecks         *prometheus.CounterVec
	driftLastCheck      prometheus.Gauge
	driftRepairs        *prometheus.CounterVec
	flowtableSkipped    prometheus.Counter
	flowtableDevices    prometheus.Gauge
	flowtableErrors     prometheus.Counter
	datapathProbes      *prometheus.CounterVec
	certReloads         *prometheus.CounterVec
	certExpiry          *prometheus.GaugeVec
	// datapathHealthy is registered only with the canary on
	// (DatapathProbeEnabled): a 0 from an agent that never probes would
	// read as a broken datapath.
	datapathHealthy prometheus.Gauge
	handedOver      prometheus.Gauge
	// The conntrack reconciler's (conntrack.go).
	ctDuration *prometheus.HistogramVec
	ctDeleted  *prometheus.CounterVec
	ctErrors   *prometheus.CounterVec
}

func programmingBuckets() []float64 {
	// kube-proxy's buckets for network_programming_duration_seconds.
	b := prometheus.LinearBuckets(0.25, 0.25, 2)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

// New registers the agent's metrics, with Go and process collectors, on a
// new registry.
func New() *Metrics {
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy", Name: "sync_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}),
		syncFullDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy", Name: "sync_full_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}),
		syncPartialDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy", Name: "sync_partial_proxy_rules_duration_seconds",
			Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy", Name: "sync_proxy_rules_last_timestamp_seconds",
			Help: "The last time proxy rules were successfully synced"}),
		lastQueued: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy", Name: "sync_proxy_rules_last_queued_timestamp_seconds",
			Help: "The last time a sync of proxy rules was queued"}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy", Name: "network_programming_duration_seconds",
			Help: "In Cluster Network Programming Latency in seconds", Buckets: programmingBuckets()}),
		endpointChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy", Name: "sync_proxy_rules_endpoint_changes_total",
			Help: "Cumulative proxy rules Endpoint changes"}),
		serviceChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy", Name: "sync_proxy_rules_service_changes_total",
			Help: "Cumulative proxy rules Service changes"}),
		appliedVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchyard_agent_applied_version",
			Help: "1 for the system version of the view the agent applied last"}, []string{"version"}),
		appliedResources: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_agent_applied_resources",
			Help: "Resources in the applied view"}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_agent_sync_errors_total",
			Help: "Applies that failed; the last good state was kept"}),
		nacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_agent_nacks_total",
			Help: "NACKs sent to the control plane"}),
		connected: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchyard_agent_control_plane_connected",
			Help: "1 while a stream to the control-plane address is open"}, []string{"address"}),
		modeSwitches: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_agent_mode_switches_total",
			Help: "Dataplane mode switches"}),
		stateRejections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_agent_state_file_rejections_total",
			Help: "State files not restored at start, by reason (empty, legacy, node, checksum, …); the kernel was adopted as found"}, []string{"reason"}),
		stateWriteErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_agent_state_file_write_errors_total",
			Help: "Failed writes of the state files (the intent before a commit, or the view after it)"}),
		driftChecks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_agent_drift_checks_total",
			Help: "Checks that the kernel still holds what the agent applied, by mode and result (clean, drifted)"}, []string{"mode", "result"}),
		driftLastCheck: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_agent_drift_last_check_timestamp_seconds",
			Help: "When the kernel was last checked against what the agent applied"}),
		driftRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_agent_drift_repairs_total",
			Help: "Objects found changed underneath the agent and repaired by a full sync, by mode and kind (table, chain, rule, set, element)"}, []string{"mode", "what"}),
		flowtableSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_agent_flowtable_skipped_syncs_total",
			Help: "Syncs that left out the flowtable fast path the node's settings ask for, because the kernel refuses flowtables (nftables mode)."}),
		flowtableDevices: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_agent_flowtable_devices",
			Help: "Interfaces in the nftables mode's flowtable after the last sync (per family, the largest)."}),
		flowtableErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_agent_flowtable_device_errors_total",
			Help: "Transactions adding interfaces to the flowtable that failed (retried at the next sync)."}),
		datapathProbes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_agent_datapath_probes_total",
			Help: "Probes of the datapath canary through the programmed rules, by result (ok, failed, skipped: the canary could not be probed)"}, []string{"result"}),
		datapathHealthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_agent_datapath_healthy",
			Help: "1 while the datapath canary answers through the programmed rules, 0 once it failed the threshold in a row"}),
		handedOver: prometheus.NewGauge(prometheus.GaugeOpts{Name: "switchyard_agent_handed_to_kube_proxy",
			Help: "1 while kube-proxy runs on this node and forwards in the agent's place (the agent writes no rule), 0 while the agent forwards"}),
		certReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_agent_certificate_reloads_total",
			Help: "Loads of new content of the TLS files (--ca-file, --cert-file), by file and result (ok: in use from the next handshake; failed: unreadable, cut short, garbage or a key that does not match, the last good one kept)"}, []string{"file", "result"}),
		certExpiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "switchyard_agent_certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the certificate in use from the file (a CA bundle: its first certificate to expire), in seconds since the epoch"}, []string{"file"}),
		ctDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kubeproxy", Name: "conntrack_reconciler_sync_duration_seconds",
			Help: "ReconcileConntrackFlowsLatency latency in seconds", Buckets: syncBuckets}, []string{"ip_family"}),
		ctDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubeproxy", Name: "conntrack_reconciler_deleted_entries_total",
			Help: "Cumulative conntrack flows deleted by conntrack reconciler, by reason (endpoint_gone, no_endpoints, service_gone, not_nated)"}, []string{"ip_family", "reason"}),
		ctErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_agent_conntrack_reconcile_errors_total",
			Help: "Conntrack reconciles that failed to list or delete entries; retried at the next one"}, []string{"ip_family"}),
	}
	m.reg.MustRegister(m.syncDuration, m.syncFullDuration, m.syncPartialDuration, m.lastSync, m.lastQueued,
		m.programming, m.endpointChanges, m.serviceChanges, m.appliedVersion, m.appliedResources,
		m.syncErrors, m.nacks, m.connected, m.modeSwitches, m.stateRejections, m.stateWriteErrors,
		m.driftChecks, m.driftLastCheck, m.driftRepairs, m.flowtableSkipped, m.flowtableDevices, m.flowtableErrors, m.datapathProbes, m.handedOver, m.certReloads, m.certExpiry,
		m.ctDuration, m.ctDeleted, m.ctErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// HandedOver records whether kube-proxy forwards in the agent's place.
func (m *Metrics) HandedOver(yes bool) {
	if m == nil {
		return
	}
	v := 0.0
	if yes {
		v = 1
	}
	m.handedOver.Set(v)
}

// Registry returns the registry, e.g. for tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Synced records a successful sync.
func (m *Metrics) Synced(full bool, d time.Duration, at time.Time, version string, resources int) {
	if m == nil {
		return
	}
	m.syncDuration.Observe(d.Seconds())
	if full {
		m.syncFullDuration.Observe(d.Seconds())
	} else {
		m.syncPartialDuration.Observe(d.Seconds())
	}
	m.lastSync.Set(float64(at.UnixNano()) / 1e9)
	m.appliedVersion.Reset()
	m.appliedVersion.WithLabelValues(version).Set(1)
	m.appliedResources.Set(float64(resources))
}

// Queued records that an update was queued at t.
func (m *Metrics) Queued(t time.Time) {
	if m == nil {
		return
	}
	m.lastQueued.Set(float64(t.UnixNano()) / 1e9)
}

// Changes counts service and endpoint changes applied.
func (m *Metrics) Changes(services, endpoints int) {
	if m == nil {
		return
	}
	m.serviceChanges.Add(float64(services))
	m.endpointChanges.Add(float64(endpoints))
}

// ProgrammingLatency observes one network programming latency.
func (m *Metrics) ProgrammingLatency(d time.Duration) {
	if m == nil {
		return
	}
	m.programming.Observe(d.Seconds())
}

// SyncFailed counts a failed apply.
func (m *Metrics) SyncFailed() {
	if m == nil {
		return
	}
	m.syncErrors.Inc()
}

// ModeSwitched counts a mode switch.
func (m *Metrics) ModeSwitched() {
	if m == nil {
		return
	}
	m.modeSwitches.Inc()
}

// StateRejected counts a state file not restored, by reason.
func (m *Metrics) StateRejected(reason string) {
	if m == nil {
		return
	}
	m.stateRejections.WithLabelValues(reason).Inc()
}

// StateWriteFailed counts a failed write of the state file.
func (m *Metrics) StateWriteFailed() {
	if m == nil {
		return
	}
	m.stateWriteErrors.Inc()
}

// Nacked counts a NACK; it implements discovery.Observer.
func (m *Metrics) Nacked() {
	if m == nil {
		return
	}
	m.nacks.Inc()
}

// Connected records a stream opening or ending; it implements
// discovery.Observer.
func (m *Metrics) Connected(addr string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.connected.WithLabelValues(addr).Set(v)
}

// DriftChecked records one drift check (errors count as clean: they are
// logged and reported, and repair nothing).
func (m *Metrics) DriftChecked(mode string, at time.Time, drifted bool) {
	if m == nil {
		return
	}
	result := "clean"
	if drifted {
		result = "drifted"
	}
	m.driftChecks.WithLabelValues(mode, result).Inc()
	m.driftLastCheck.Set(float64(at.UnixNano()) / 1e9)
}

// DriftRepaired counts n objects of kind what repaired in mode.
func (m *Metrics) DriftRepaired(mode, what string, n int) {
	if m == nil {
		return
	}
	m.driftRepairs.WithLabelValues(mode, what).Add(float64(n))
}

// Datapath probe results, the result label of
// switchyard_agent_datapath_probes_total.
const (
	ProbeOK      = "ok"
	ProbeFailed  = "failed"
	ProbeSkipped = "skipped"
)

// DatapathProbeEnabled exports switchyard_agent_datapath_healthy, at 1
// until a probe says otherwise (as /healthz); call it once, when the
// datapath canary is on.
func (m *Metrics) DatapathProbeEnabled() {
	if m == nil {
		return
	}
	m.datapathHealthy.Set(1)
	m.reg.MustRegister(m.datapathHealthy)
}

// DatapathProbed counts one probe of the datapath canary (result: Probe*)
// and records the datapath's health after it.
func (m *Metrics) DatapathProbed(result string, healthy bool) {
	if m == nil {
		return
	}
	m.datapathProbes.WithLabelValues(result).Inc()
	v := 0.0
	if healthy {
		v = 1
	}
	m.datapathHealthy.Set(v)
}

// Certificate load results, the result label of
// switchyard_agent_certificate_reloads_total.
const (
	ReloadOK     = "ok"
	ReloadFailed = "failed"
)

// Certificates returns what reports the TLS files' loads into these
// metrics (a certfile.Observer).
func (m *Metrics) Certificates() CertificateLoads { return CertificateLoads{m: m} }

// CertificateLoads is the agent's certfile.Observer.
type CertificateLoads struct{ m *Metrics }

// Loaded counts one load of new content of file.
func (c CertificateLoads) Loaded(file string, err error) {
	if c.m == nil {
		return
	}
	result := ReloadOK
	if err != nil {
		result = ReloadFailed
	}
	c.m.certReloads.WithLabelValues(file, result).Inc()
}

// Expiry records the NotAfter of what is in use from file.
func (c CertificateLoads) Expiry(file string, notAfter time.Time) {
	if c.m == nil {
		return
	}
	c.m.certExpiry.WithLabelValues(file).Set(float64(notAfter.Unix()))
}

// Flowtable records a sync's flowtable outcome (dataplane.SyncStats):
// skipped on a kernel without flowtables, the devices it holds, the
// device transactions that failed.
func (m *Metrics) Flowtable(skipped bool, devices, errors int) {
	if m == nil {
		return
	}
	if skipped {
		m.flowtableSkipped.Inc()
	}
	m.flowtableDevices.Set(float64(devices))
	m.flowtableErrors.Add(float64(errors))
}
