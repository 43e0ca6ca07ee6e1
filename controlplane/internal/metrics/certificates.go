package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Certificate load results, the result label of
// switchyard_controlplane_certificate_reloads_total.
const (
	ReloadOK     = "ok"
	ReloadFailed = "failed"
)

// Certificates holds the collectors of the TLS files the control plane
// reloads (--tls-cert-file, --client-ca-file); it is their
// certfile.Observer.
type Certificates struct {
	// Reloads counts loads of new content by file and result.
	Reloads *prometheus.CounterVec
	// NotAfter is the NotAfter of what is in use from each file.
	NotAfter *prometheus.GaugeVec
}

// RegisterCertificates creates the certificate collectors and registers
// them on reg.
func RegisterCertificates(reg prometheus.Registerer) (*Certificates, error) {
	c := &Certificates{
		Reloads: prometheus.NewCounterVec(prometheus.CounterOpts(opts("certificate_reloads_total",
			"Loads of new content of the TLS files (--tls-cert-file, --client-ca-file), by file and result (ok: served from the next handshake; failed: unreadable, cut short, garbage or a key that does not match, the last good one kept).")), []string{"file", "result"}),
		NotAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("certificate_expiry_timestamp_seconds",
			"NotAfter of the certificate in use from the file (a CA bundle: its first certificate to expire), in seconds since the epoch.")), []string{"file"}),
	}
	if err := registerAll(reg, "certificate", c.Reloads, c.NotAfter); err != nil {
		return nil, err
	}
	return c, nil
}

// Loaded counts one load of new content of file.
func (c *Certificates) Loaded(file string, err error) {
	if c == nil {
		return
	}
	result := ReloadOK
	if err != nil {
		result = ReloadFailed
	}
	c.Reloads.WithLabelValues(file, result).Inc()
}

// Expiry records the NotAfter of what is in use from file.
func (c *Certificates) Expiry(file string, notAfter time.Time) {
	if c == nil {
		return
	}
	c.NotAfter.WithLabelValues(file).Set(float64(notAfter.Unix()))
}
