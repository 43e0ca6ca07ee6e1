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

func TestScenarios(t *testing.T) {
	scenario.Run(t, newTracer)
}

// TestScenariosIPv6 runs the table with every address moved to IPv6.
func TestScenariosIPv6(t *testing.T) {
	scenario.Run(t, func(t *testing.T) scenario.Tracer { return scenario.IPv6(newTracer(t)) })
}

func TestTraceAgreesWithExplainer(t *testing.T) {
	scenario.AgreeWithExplainer(t, newTracer, scenario.AgreeOptions{Probes: scenario.WideProbes, Walk: true})
}
