package scenario

import "testing"

// RunAll is the whole test a mode's driver runs, every part a subtest of
// t beside the others, each with tracers from newTracer: the table (Run;
// subtests named for the scenarios), the table moved to IPv6 (IPv6;
// "ipv6-<scenario>") and the tracer against the explainer over every
// golden input (agree says how; "explain-<input>"). The parts stay flat
// under t rather than one level down, so `go test -run` patterns and
// `-v` output name a scenario as Run always has.
func RunAll(t *testing.T, newTracer func(*testing.T) Tracer, agree AgreeOptions) {
	t.Helper()
	run(t, "", newTracer)
	run(t, "ipv6-", func(t *testing.T) Tracer { return IPv6(newTracer(t)) })
	agreeWithExplainer(t, "explain-", newTracer, agree)
}
