package scenario

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

//go:embed testdata/*.yaml
var files embed.FS

// Scenario is one file: a node and the steps it goes through.
type Scenario struct {
	Name  string
	Node  *switchyardv1.NodeConfig
	Steps []Step
}

// Step is one change of the node's state and what packets do after it.
type Step struct {
	Name   string
	Set    []*switchyardv1.ServiceView
	Delete []string
	// Node replaces the NodeConfig when set.
	Node   *switchyardv1.NodeConfig
	Expect []Expect
}

// Expect is one packet and its verdict in every mode, with the modes that
// differ by design.
type Expect struct {
	Packet explain.Packet
	Want   explain.Verdict
	Modes  map[string]explain.Verdict
}

// For is the verdict expected in mode.
func (e Expect) For(mode string) explain.Verdict {
	if v, ok := e.Modes[mode]; ok {
		return v
	}
	return e.Want
}

// file is a scenario as YAML spells it.
type file struct {
	Node  json.RawMessage `json:"node"`
	Steps []struct {
		Name   string            `json:"name"`
		Set    []json.RawMessage `json:"set"`
		Delete []string          `json:"delete"`
		Node   json.RawMessage   `json:"node"`
		Expect []expectFile      `json:"expect"`
	} `json:"steps"`
}

type verdictFile struct {
	Action     *string   `json:"action"`
	Endpoints  *[]string `json:"endpoints"`
	Masquerade *bool     `json:"masquerade"`
	Affinity   *uint32   `json:"affinity"`
	Why        *string   `json:"why"`
}

type expectFile struct {
	Packet string `json:"packet"`
	verdictFile
	Modes map[string]verdictFile `json:"modes"`
}

// Load reads every embedded scenario, sorted by name.
func Load() ([]Scenario, error) {
	names, err := files.ReadDir("testdata")
	if err != nil {
		return nil, err
	}
	var out []Scenario
	for _, n := range names {
		raw, err := files.ReadFile(path.Join("testdata", n.Name()))
		if err != nil {
			return nil, err
		}
		sc, err := Parse(strings.TrimSuffix(n.Name(), ".yaml"), raw)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// Parse reads one scenario file.
func Parse(name string, raw []byte) (Scenario, error) {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", name, err)
	}
	var f file
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Scenario{}, fmt.Errorf("scenario %s: %w", name, err)
	}
	sc := Scenario{Name: name}
	if sc.Node, err = nodeConfig(f.Node); err != nil {
		return sc, fmt.Errorf("scenario %s: node: %w", name, err)
	}
	if sc.Node == nil {
		return sc, fmt.Errorf("scenario %s: no node", name)
	}
	for i, fs := range f.Steps {
		st := Step{Name: fs.Name, Delete: fs.Delete}
		if st.Name == "" {
			st.Name = fmt.Sprintf("step%d", i+1)
		}
		where := fmt.Sprintf("scenario %s step %s", name, st.Name)
		if st.Node, err = nodeConfig(fs.Node); err != nil {
			return sc, fmt.Errorf("%s: node: %w", where, err)
		}
		for _, r := range fs.Set {
			sv := &switchyardv1.ServiceView{}
			if err := protojson.Unmarshal(r, sv); err != nil {
				return sc, fmt.Errorf("%s: set: %w", where, err)
			}
			st.Set = append(st.Set, sv)
		}
		for _, ef := range fs.Expect {
			e, err := readExpect(ef)
			if err != nil {
				return sc, fmt.Errorf("%s: %w", where, err)
			}
			st.Expect = append(st.Expect, e)
		}
		sc.Steps = append(sc.Steps, st)
	}
	return sc, nil
}

func nodeConfig(raw json.RawMessage) (*switchyardv1.NodeConfig, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	nc := &switchyardv1.NodeConfig{}
	return nc, protojson.Unmarshal(raw, nc)
}

func readExpect(ef expectFile) (Expect, error) {
	pkt, err := explain.ParsePacket(ef.Packet)
	if err != nil {
		return Expect{}, err
	}
	e := Expect{Packet: pkt, Modes: map[string]explain.Verdict{}}
	if ef.Action == nil {
		return e, fmt.Errorf("packet %s: no action", pkt)
	}
	if e.Want, err = ef.verdictFile.over(explain.Verdict{}); err != nil {
		return e, fmt.Errorf("packet %s: %w", pkt, err)
	}
	for mode, vf := range ef.Modes {
		if e.Modes[mode], err = vf.over(e.Want); err != nil {
			return e, fmt.Errorf("packet %s, mode %s: %w", pkt, mode, err)
		}
	}
	return e, nil
}

// over is base with the fields vf sets.
func (vf verdictFile) over(base explain.Verdict) (explain.Verdict, error) {
	v := base
	if vf.Action != nil {
		v.Action = explain.Action(*vf.Action)
		switch v.Action {
		case explain.Forward, explain.Reject, explain.Drop, explain.Pass:
		default:
			return v, fmt.Errorf("action %q: want forward, reject, drop or pass", *vf.Action)
		}
	}
	if vf.Endpoints != nil {
		eps := make([]netip.AddrPort, 0, len(*vf.Endpoints))
		for _, s := range *vf.Endpoints {
			ap, err := netip.ParseAddrPort(s)
			if err != nil {
				return v, fmt.Errorf("endpoint: %w", err)
			}
			eps = append(eps, ap)
		}
		v.Endpoints = explain.Even(eps...)
	}
	if vf.Masquerade != nil {
		v.Masquerade = *vf.Masquerade
	}
	if vf.Affinity != nil {
		v.AffinitySeconds = *vf.Affinity
	}
	if vf.Why != nil {
		v.Why = explain.Why(*vf.Why)
	}
	if v.Action == explain.Forward && len(v.Endpoints) == 0 {
		return v, fmt.Errorf("forward without endpoints")
	}
	return v, nil
}

// State is the node's state after steps[:n+1], as a fresh State (a mode
// may keep the previous one).
func (sc *Scenario) State(n int) *dataplane.State {
	st := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{}}
	st.Config = sc.Node
	for _, step := range sc.Steps[:n+1] {
		if step.Node != nil {
			st.Config = step.Node
		}
		for _, sv := range step.Set {
			st.Services[sv.GetNamespace()+"/"+sv.GetName()] = sv
		}
		for _, name := range step.Delete {
			delete(st.Services, name)
		}
	}
	return st
}

// Tracer is a mode under test (or the explainer in a mode).
type Tracer interface {
	// Mode is the mode whose expectations apply.
	Mode() string
	// Apply programs st: the first call is a first sync, the later ones
	// partial syncs, as an agent applies changes.
	Apply(t testing.TB, st *dataplane.State)
	// Trace says what the programmed rules do with pkt.
	Trace(t testing.TB, pkt explain.Packet) explain.Verdict
}

// Run runs every scenario against a new tracer each, as subtests named
// for the scenarios.
func Run(t *testing.T, newTracer func(t *testing.T) Tracer) {
	t.Helper()
	run(t, "", newTracer)
}

// run is Run with prefix before every subtest's name, so RunAll can put
// several runs of the table side by side under one test.
func run(t *testing.T, prefix string, newTracer func(t *testing.T) Tracer) {
	t.Helper()
	all, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no scenarios")
	}
	for _, sc := range all {
		t.Run(prefix+sc.Name, func(t *testing.T) {
			tr := newTracer(t)
			for i, step := range sc.Steps {
				tr.Apply(t, sc.State(i))
				for _, e := range step.Expect {
					want := e.For(tr.Mode())
					got := tr.Trace(t, e.Packet)
					d := explain.Diff(want, got)
					if want.Why != "" && got.Why != "" && want.Why != got.Why {
						d = append(d, fmt.Sprintf("why: want %s, got %s", want.Why, got.Why))
					}
					if len(d) > 0 {
						t.Errorf("step %s: %s: %s\n  got: %s\n  path: %s", step.Name, e.Packet, strings.Join(d, "; "), got, strings.Join(got.Path, " > "))
					}
				}
			}
		})
	}
}

// Modes lists the modes every scenario runs in.
func Modes() []string {
	return slices.Clone([]string{explain.ModeIPTables, explain.ModeIPVS, explain.ModeNFTables, explain.ModeUserspace})
}
