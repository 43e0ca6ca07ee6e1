package explain_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

// explainer is the scenario Tracer of the explainer in one mode.
type explainer struct {
	mode string
	st   *dataplane.State
}

func (e *explainer) Mode() string                            { return e.mode }
func (e *explainer) Apply(_ testing.TB, st *dataplane.State) { e.st = st }
func (e *explainer) Trace(_ testing.TB, pkt explain.Packet) explain.Verdict {
	return explain.Explain(e.st, e.mode, pkt)
}

func TestScenarios(t *testing.T) {
	for _, mode := range scenario.Modes() {
		t.Run(mode, func(t *testing.T) {
			scenario.Run(t, func(*testing.T) scenario.Tracer { return &explainer{mode: mode} })
		})
	}
}
