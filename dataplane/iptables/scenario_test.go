package iptables_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

// newTracer is the iptables mode under the scenario table: a Dataplane
// over a Fake, synced as an agent syncs it, and the Fake's packet tracer.
func newTracer(t *testing.T) scenario.Tracer {
	f := iptablestest.New()
	return scenario.NewTracer(newDP(t, f), f.Trace)
}

// TestScenarios runs the table on IPv4 and IPv6 and walks the golden
// inputs against the explainer.
func TestScenarios(t *testing.T) {
	scenario.RunAll(t, newTracer, scenario.AgreeOptions{Probes: scenario.WideProbes, Walk: true})
}
