package metrics

import "time"

// ConntrackReconciled records one family's conntrack reconcile: how long
// it took and how many entries it deleted, by reason.
func (m *Metrics) ConntrackReconciled(family string, d time.Duration, deleted map[string]int) {
	if m == nil {
		return
	}
	m.ctDuration.WithLabelValues(family).Observe(d.Seconds())
	for reason, n := range deleted {
		m.ctDeleted.WithLabelValues(family, reason).Add(float64(n))
	}
}

// ConntrackReconcileFailed counts a reconcile of family that failed.
func (m *Metrics) ConntrackReconcileFailed(family string) {
	if m == nil {
		return
	}
	m.ctErrors.WithLabelValues(family).Inc()
}
