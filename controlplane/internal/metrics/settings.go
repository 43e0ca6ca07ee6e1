package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Settings holds the collectors of the NodeConfig settings
// (package settings): which settings a replica sends, so that an alert can
// compare replicas (count by hash), and how often they were refused or
// an agent came with another replica's.
type Settings struct {
	mu sync.Mutex
	// Info is 1 for the settings hash and source in use, absent otherwise.
	Info *prometheus.GaugeVec
	// Rejected counts ConfigMaps that could not be used.
	Rejected prometheus.Counter
	// AgentsDiffer counts agents that connected programming other
	// settings than this replica's.
	AgentsDiffer prometheus.Counter
}

// RegisterSettings creates the settings collectors and registers them on reg.
func RegisterSettings(reg prometheus.Registerer) (*Settings, error) {
	s := &Settings{
		Info: prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("settings_info",
			"1 for the NodeConfig settings this replica sends: their hash (NodeConfig.settings_hash) and source (configmap or flags). Replicas that agree have one hash.")), []string{"hash", "source"}),
		Rejected: prometheus.NewCounter(prometheus.CounterOpts(opts("settings_rejected_total",
			"Settings ConfigMaps that could not be used (they did not parse or held an invalid value); the settings in use were kept."))),
		AgentsDiffer: prometheus.NewCounter(prometheus.CounterOpts(opts("agent_settings_differ_total",
			"Agents that connected programming NodeConfig settings with another hash than this replica's (set by a replica with other settings, or before they changed)."))),
	}
	if err := registerAll(reg, "settings", s.Info, s.Rejected, s.AgentsDiffer); err != nil {
		return nil, err
	}
	return s, nil
}

// SettingsInUse makes hash and source the only settings reported.
func (s *Settings) SettingsInUse(hash, source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Info.Reset()
	s.Info.WithLabelValues(hash, source).Set(1)
}

// SettingsRejected counts a ConfigMap that could not be used.
func (s *Settings) SettingsRejected() { s.Rejected.Inc() }

// AgentSettingsDiffer counts an agent with other settings.
func (s *Settings) AgentSettingsDiffer() { s.AgentsDiffer.Inc() }
