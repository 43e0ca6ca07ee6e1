package ipvs_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

// newTracer is the ipvs mode under the scenario table: a dual-stack
// Dataplane over a Fake, synced as an agent syncs it, and the Fake's
// packet tracer.
func newTracer(t *testing.T) scenario.Tracer {
	f := ipvstest.New()
	d := newDataplane(t, f, ipvs.Config{Families: []dataplane.Family{dataplane.IPv4, dataplane.IPv6}})
	return scenario.NewTracer(d, f.Trace)
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
