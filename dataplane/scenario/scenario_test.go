package scenario_test

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

func TestLoadEveryScenario(t *testing.T) {
	all, err := scenario.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 5 {
		t.Fatalf("%d scenarios", len(all))
	}
	for _, sc := range all {
		n := 0
		for _, st := range sc.Steps {
			n += len(st.Expect)
		}
		if len(sc.Steps) == 0 || n == 0 {
			t.Errorf("%s: %d steps, %d expectations", sc.Name, len(sc.Steps), n)
		}
		for mode := range sc.Steps[0].Expect[0].Modes {
			if !strings.Contains(strings.Join(scenario.Modes(), ","), mode) {
				t.Errorf("%s: unknown mode %q", sc.Name, mode)
			}
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"no node":          "steps: []",
		"unknown field":    "node: {nodeName: a}\nsteps:\n- name: x\n  sett: []",
		"bad action":       "node: {nodeName: a}\nsteps:\n- expect:\n  - {packet: tcp 1.1.1.1 -> 2.2.2.2:80, action: accept}",
		"forward, no eps":  "node: {nodeName: a}\nsteps:\n- expect:\n  - {packet: tcp 1.1.1.1 -> 2.2.2.2:80, action: forward}",
		"bad packet":       "node: {nodeName: a}\nsteps:\n- expect:\n  - {packet: tcp 1.1.1.1 2.2.2.2:80, action: pass}",
		"bad service":      "node: {nodeName: a}\nsteps:\n- set: [{clusterIps: 7}]",
		"no action":        "node: {nodeName: a}\nsteps:\n- expect:\n  - {packet: tcp 1.1.1.1 -> 2.2.2.2:80}",
		"mixed families":   "node: {nodeName: a}\nsteps:\n- expect:\n  - {packet: tcp fd00::1 -> 2.2.2.2:80, action: pass}",
		"bad mode verdict": "node: {nodeName: a}\nsteps:\n- expect:\n  - {packet: tcp 1.1.1.1 -> 2.2.2.2:80, action: pass, modes: {ipvs: {action: nope}}}",
	} {
		if _, err := scenario.Parse(name, []byte(src)); err == nil {
			t.Errorf("%s: Parse accepted %q", name, src)
		}
	}
}

func TestStateFollowsSteps(t *testing.T) {
	sc, err := scenario.Parse("s", []byte(`node: {nodeName: a}
steps:
- set: [{namespace: d, name: x}, {namespace: d, name: "y"}]
- delete: [d/x]
  node: {nodeName: b}
`))
	if err != nil {
		t.Fatal(err)
	}
	if st := sc.State(0); len(st.Services) != 2 || st.Config.GetNodeName() != "a" {
		t.Errorf("step 1: %v", st)
	}
	if st := sc.State(1); len(st.Services) != 1 || st.Services["d/y"] == nil || st.Config.GetNodeName() != "b" {
		t.Errorf("step 2: %v", st)
	}
}
