package rollout

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Node labels the plan reads.
const (
	// ModeLabel on a Node sets its dataplane mode over every other
	// setting: the cluster's, a rollout's.
	ModeLabel = model.LabelPrefix + "mode"
	// CanaryLabel "true" makes a Node a canary of every rollout.
	CanaryLabel = model.LabelPrefix + "rollout-canary"
	// ProgressAnnotation on the settings ConfigMap records how far the
	// rollout has gone (Progress, as JSON).
	ProgressAnnotation = model.LabelPrefix + "rollout-progress"
)

// Spec is a rollout as config.yaml declares it.
type Spec struct {
	// Name identifies the rollout: a new name starts over from the first
	// step, and orders the nodes anew.
	Name string
	// Target are the settings the rollout brings: the cluster's with the
	// rollout's fields over them.
	Target nodeview.Defaults
	// CanaryNodes are named canaries, beside the nodes labelled
	// CanaryLabel.
	CanaryNodes []string
	// Percents are the shares of all nodes reached after the canaries,
	// growing; the last is 100.
	Percents []float64
	// Pause is how long every reached node must stay applied and healthy
	// before the next step.
	Pause time.Duration
}

// DefaultPause is Spec.Pause when config.yaml leaves it out.
const DefaultPause = 30 * time.Second

// ParseSteps reads config.yaml's steps ("10%", "50%", "100%"): growing
// shares in (0, 100], ending at 100 (added when missing). Empty is
// ["100%"].
func ParseSteps(steps []string) ([]float64, error) {
	var out []float64
	for _, s := range steps {
		t := strings.TrimSpace(s)
		v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
		if err != nil || !strings.HasSuffix(t, "%") || math.IsNaN(v) || v <= 0 || v > 100 {
			return nil, fmt.Errorf("step %q: want a share like 10%%, above 0%% and at most 100%%", s)
		}
		if len(out) > 0 && v <= out[len(out)-1] {
			return nil, fmt.Errorf("step %q: steps must grow", s)
		}
		out = append(out, v)
	}
	if len(out) == 0 || out[len(out)-1] != 100 {
		out = append(out, 100)
	}
	return out, nil
}

// Progress is how far the fleet has gone, as the ConfigMap records it.
type Progress struct {
	// Name is the rollout's; a Progress of another name is no progress.
	Name string `json:"name"`
	// Step indexes Plan.Steps.
	Step int `json:"step"`
	// Halted is why the rollout stopped; empty while it runs.
	Halted string `json:"halted,omitempty"`
	// Waiting are the replicas (by id) that serve reached nodes not yet
	// applied, each with when it last said so: no replica moves the step
	// on while another waits. An entry older than StaleWaiting is a
	// replica gone (its agents are served elsewhere now) and ignored.
	Waiting map[string]time.Time `json:"waiting,omitempty"`
}

// Waiting entries are refreshed every RefreshWaiting and ignored once
// older than StaleWaiting.
const (
	RefreshWaiting = 10 * time.Second
	StaleWaiting   = 30 * time.Second
)

// stepKey identifies one step of one rollout.
type stepKey struct {
	name string
	step int
}

func (p Progress) step() stepKey { return stepKey{p.Name, p.Step} }

// waitingOthers are the replicas other than self that wait, freshly.
func (p Progress) waitingOthers(self string, now time.Time) []string {
	var out []string
	for r, at := range p.Waiting {
		if r != self && now.Sub(at) < StaleWaiting {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// with returns p with self waiting since now (wait) or not.
func (p Progress) with(self string, wait bool, now time.Time) Progress {
	w := make(map[string]time.Time, len(p.Waiting)+1)
	for r, at := range p.Waiting {
		if r != self {
			w[r] = at
		}
	}
	if wait {
		w[self] = now.UTC().Truncate(time.Second)
	}
	if len(w) == 0 {
		w = nil
	}
	p.Waiting = w
	return p
}

// ParseProgress reads the annotation; anything unreadable is no progress
// (the rollout starts from its first step, which never takes settings
// from a node that has them: steps only grow from there).
func ParseProgress(s string) Progress {
	var p Progress
	if s == "" || json.Unmarshal([]byte(s), &p) != nil || p.Step < 0 {
		return Progress{}
	}
	return p
}

// String is the annotation's value.
func (p Progress) String() string {
	b, _ := json.Marshal(p) // strings and an int always encode
	return string(b)
}

// Step is one step of a plan.
type Step struct {
	// Name is "canary" or the share ("10%").
	Name string
	// Nodes are the nodes reached once the step runs, sorted.
	Nodes []string
}

// Plan is what the settings of every node are.
type Plan struct {
	// Settings go to nodeview.Index.WithSettings.
	Settings nodeview.Settings
	// Spec is nil without a rollout; then Steps and Progress are empty.
	Spec     *Spec
	Progress Progress
	Steps    []Step
	// Source says where each node with settings of its own has them
	// from: "label" or "rollout".
	Source map[string]string
	// ResourceVersion is the ConfigMap's the plan was read from: the
	// precondition of the Progress written after it.
	ResourceVersion string
	// hashes are the settings hashes of the nodes with settings of their
	// own; the others have baseHash.
	hashes   map[string]string
	baseHash string
}

// SettingsHash is the settings hash the plan gives the named node.
func (p *Plan) SettingsHash(node string) string {
	if h, ok := p.hashes[node]; ok {
		return h
	}
	return p.baseHash
}

// TargetHash is the settings hash of the rollout's target; empty without
// a rollout.
func (p *Plan) TargetHash() string {
	if p.Spec == nil {
		return ""
	}
	return nodeview.SettingsHash(p.Spec.Target)
}

// Reached is the step's nodes; nil before any.
func (p *Plan) Reached() []string {
	if p.Spec == nil || len(p.Steps) == 0 {
		return nil
	}
	return p.Steps[min(p.Progress.Step, len(p.Steps)-1)].Nodes
}

// NewPlan decides every node's settings: base, the rollout's target on
// the nodes its progress has reached, and a node's ModeLabel over either.
// A label naming no mode is ignored. resourceVersion is the ConfigMap's
// that spec and prog were read from.
func NewPlan(base nodeview.Defaults, spec *Spec, prog Progress, resourceVersion string, nodes map[string]*model.Node,
	parseMode func(string) (switchyardv1.DataplaneMode, error)) Plan {
	p := Plan{Settings: nodeview.Settings{Defaults: base}, Spec: spec, Source: map[string]string{},
		ResourceVersion: resourceVersion, baseHash: nodeview.SettingsHash(base)}
	per := map[string]nodeview.Defaults{}
	if spec != nil {
		if prog.Name != spec.Name {
			prog = Progress{Name: spec.Name}
		}
		p.Steps = steps(spec, nodes)
		prog.Step = min(prog.Step, len(p.Steps)-1)
		p.Progress = prog
		for _, n := range p.Reached() {
			per[n] = spec.Target
			p.Source[n] = "rollout"
		}
	}
	for name, n := range nodes {
		v, ok := n.Labels[ModeLabel]
		if !ok {
			continue
		}
		m, err := parseMode(v)
		if err != nil || m == switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED {
			continue
		}
		d, ok := per[name]
		if !ok {
			d = base
		}
		d.Mode = m
		per[name] = d
		p.Source[name] = "label"
	}
	if len(per) > 0 {
		p.Settings.PerNode = per
		p.hashes = make(map[string]string, len(per))
		target := p.TargetHash()
		for name, d := range per {
			if p.Source[name] == "rollout" {
				p.hashes[name] = target
				continue
			}
			p.hashes[name] = nodeview.SettingsHash(d)
		}
	}
	return p
}

// steps lists the rollout's steps over the nodes: the canaries (when
// there are any), then each share of the nodes in rank order, each step
// holding the ones before it.
func steps(spec *Spec, nodes map[string]*model.Node) []Step {
	canary := map[string]bool{}
	for _, n := range spec.CanaryNodes {
		if _, ok := nodes[n]; ok {
			canary[n] = true
		}
	}
	for name, n := range nodes {
		if n.Labels[CanaryLabel] == "true" {
			canary[name] = true
		}
	}
	var out []Step
	if len(canary) > 0 {
		out = append(out, Step{Name: "canary", Nodes: sortedKeys(canary)})
	}
	ranked := rank(spec.Name, nodes)
	for _, pct := range spec.Percents {
		k := int(math.Ceil(pct / 100 * float64(len(ranked))))
		in := make(map[string]bool, len(canary)+k)
		for n := range canary {
			in[n] = true
		}
		for _, n := range ranked[:k] {
			in[n] = true
		}
		out = append(out, Step{Name: strconv.FormatFloat(pct, 'f', -1, 64) + "%", Nodes: sortedKeys(in)})
	}
	return out
}

// rank orders the nodes by a hash of the rollout's name and theirs.
func rank(rollout string, nodes map[string]*model.Node) []string {
	type ranked struct {
		key  uint64
		name string
	}
	rs := make([]ranked, 0, len(nodes))
	for name := range nodes {
		sum := sha256.Sum256([]byte(rollout + "\x00" + name))
		rs = append(rs, ranked{binary.BigEndian.Uint64(sum[:8]), name})
	}
	slices.SortFunc(rs, func(a, b ranked) int { return cmp.Or(cmp.Compare(a.key, b.key), strings.Compare(a.name, b.name)) })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
