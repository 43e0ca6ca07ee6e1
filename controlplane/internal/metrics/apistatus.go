package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
)

// apiCollector reports the API watch's state per resource at every scrape,
// read from the tracker rather than kept in gauges, so the seconds of an
// outage grow between events.
type apiCollector struct {
	t           *apistatus.Tracker
	available   *prometheus.Desc
	unavailable *prometheus.Desc
	errors      *prometheus.Desc
}

// RegisterAPIStatus registers the API watch metrics on reg, read from t:
// switchyard_controlplane_api_available{resource} (1 when its last list or
// watch was answered), switchyard_controlplane_api_unavailable_seconds
// (how long it has not been, 0 when available) and
// switchyard_controlplane_api_errors_total (failed lists and watches).
func RegisterAPIStatus(reg prometheus.Registerer, t *apistatus.Tracker) error {
	name := func(n string) string { return prometheus.BuildFQName(namespace, subsystem, n) }
	return reg.Register(&apiCollector{
		t: t,
		available: prometheus.NewDesc(name("api_available"),
			"1 when the resource's last list or watch reached the Kubernetes API, else 0 (views may be stale).", []string{"resource"}, nil),
		unavailable: prometheus.NewDesc(name("api_unavailable_seconds"),
			"Seconds since the resource's list or watch stopped reaching the Kubernetes API; 0 while it does.", []string{"resource"}, nil),
		errors: prometheus.NewDesc(name("api_errors_total"),
			"Lists and watches of the resource that failed to reach the Kubernetes API.", []string{"resource"}, nil),
	})
}

func (c *apiCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.available
	ch <- c.unavailable
	ch <- c.errors
}

func (c *apiCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.t.Snapshot() {
		up, down := 0.0, 0.0
		switch s.State {
		case apistatus.Available:
			up = 1
		case apistatus.Unavailable:
			down = c.t.Elapsed(s.Since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.available, prometheus.GaugeValue, up, s.Resource)
		ch <- prometheus.MustNewConstMetric(c.unavailable, prometheus.GaugeValue, down, s.Resource)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(s.Errors), s.Resource)
	}
}
