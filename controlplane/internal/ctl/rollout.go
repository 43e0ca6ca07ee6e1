package ctl

import (
	"context"
	"fmt"
	"io"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ExitHalted is rollout's exit status when the rollout halted.
const ExitHalted = 3

func rolloutCommand() command {
	return command{
		name: "rollout", summary: "the settings rollout: its steps, the nodes reached, why it halted (GetRollout)",
		detail: "The rollout of config.yaml's rollout as the control plane replica drives it: its state\n" +
			"(none, progressing, pausing, halted, complete), its steps and how many nodes each reaches, and\n" +
			"one line per reached node (applied, pending, nacked, unhealthy, not-connected). Replicas agree\n" +
			"on the step; each gates on the agents connected to it. Exits 3 when the rollout halted.",
		run: runRollout,
	}
}

func runRollout(ctx context.Context, s *session, _ []string) (int, error) {
	resp, err := query(ctx, s, "GetRollout", s.client.GetRollout, &switchyardv1.GetRolloutRequest{}, printRollout)
	if err != nil {
		return 0, err
	}
	if resp.GetState() == "halted" {
		return ExitHalted, nil
	}
	return ExitOK, nil
}

func printRollout(w io.Writer, r *switchyardv1.GetRolloutResponse) error {
	fmt.Fprintln(w, r.GetSummary())
	if r.GetName() == "" {
		return nil
	}
	fmt.Fprintf(w, "settings: %s -> %s\n", r.GetBaseSettingsHash(), r.GetTargetSettingsHash())
	t := newTable(w)
	row(t, "STEP", "NODES", "STATE")
	for i, st := range r.GetSteps() {
		state := "" // a step still to come
		switch {
		case uint32(i) < r.GetStep():
			state = "done"
		case uint32(i) == r.GetStep():
			state = r.GetState()
		}
		row(t, st.GetName(), fmt.Sprint(st.GetNodes()), state)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	t = newTable(w)
	row(t, "NODE", "STATE", "DETAIL")
	for _, n := range r.GetNodes() {
		row(t, n.GetName(), n.GetState(), n.GetDetail())
	}
	return t.Flush()
}
