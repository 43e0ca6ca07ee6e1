package scenario

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// AgreeOptions say how RunAll compares a mode's tracer with the
// explainer over the golden inputs; the zero value is a new tracer per
// input, asked Probes.
type AgreeOptions struct {
	// Probes are the packets asked about a state; nil is Probes.
	Probes func(*dataplane.State) []explain.Packet
	// Walk has one tracer go through the inputs in order and back, so
	// every input but the first is a partial sync from another one
	// (subtests "explain-00-affinity", ...). Without it each input is
	// the first sync of a new tracer (subtests "explain-affinity", ...).
	Walk bool
}

// agreeWithExplainer traces the probes of every golden input
// (dataplanetest.Views) through what a mode programs for it and compares
// each verdict with explain.Explain's in the tracer's mode. The goldens
// say what a mode writes for those inputs, the scenarios what some
// packets do; this checks that every packet worth asking about does
// what the explainer says, so AdminService/Explain tells the truth about
// the mode. Its subtests' names start with prefix. It logs how many
// probes it compared.
func agreeWithExplainer(t *testing.T, prefix string, newTracer func(*testing.T) Tracer, opts AgreeOptions) {
	t.Helper()
	probes := opts.Probes
	if probes == nil {
		probes = Probes
	}
	views := dataplanetest.Views()
	if len(views) == 0 {
		t.Fatal("no golden inputs")
	}
	var walker Tracer
	if opts.Walk {
		back := slices.Clone(views)
		slices.Reverse(back)
		views = slices.Concat(views, back[1:])
		walker = newTracer(t)
	}
	mode, total := "", 0
	for i, name := range views {
		sub := prefix + name
		if opts.Walk {
			sub = fmt.Sprintf("%s%02d-%s", prefix, i, name)
		}
		t.Run(sub, func(t *testing.T) {
			tr := walker
			if tr == nil {
				tr = newTracer(t)
			}
			st := dataplanetest.LoadState(t, name)
			tr.Apply(t, st)
			pkts := probes(st)
			for _, pkt := range pkts {
				agree(t, explain.Explain(st, tr.Mode(), pkt), tr.Trace(t, pkt), pkt)
			}
			mode, total = tr.Mode(), total+len(pkts)
			t.Logf("%d probes compared", len(pkts))
		})
	}
	t.Logf("mode %s: %d probes compared over %d inputs", mode, total, len(views))
}

// agree reports where the tracer's verdict on pkt differs from the
// explainer's, with the explainer's notes and the rules' path to tell
// which is wrong.
func agree(t testing.TB, want, got explain.Verdict, pkt explain.Packet) {
	t.Helper()
	if d := explain.Diff(want, got); len(d) > 0 {
		t.Errorf("%s: %s\n  explainer: %s %q\n  tracer:    %s\n  path: %s",
			pkt, strings.Join(d, "; "), want, want.Notes, got, strings.Join(got.Path, " > "))
	}
}
