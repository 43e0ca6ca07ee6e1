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

// TestScenarios runs the table on IPv4 and IPv6 and walks the golden
// inputs against the explainer.
func TestScenarios(t *testing.T) {
	scenario.RunAll(t, newTracer, scenario.AgreeOptions{Probes: scenario.WideProbes, Walk: true})
}
