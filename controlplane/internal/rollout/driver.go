package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// NodeReport is what this replica knows of one node's agent.
type NodeReport struct {
	Connected bool
	// SettingsHash is the settings hash the agent programs, from its
	// latest ACK.
	SettingsHash string
	// LastNack is when the agent last rejected a view, and why.
	LastNack    time.Time
	NackMessage string
	// Datapath is the agent's latest datapath verdict; nil without one.
	Datapath *switchyardv1.DatapathStatus
}

// Fleet reports the agents this replica serves, by node name.
type Fleet func() map[string]NodeReport

// Writer records the fleet's progress in the ConfigMap, on the condition
// that it is still at resourceVersion.
type Writer interface {
	WriteProgress(ctx context.Context, p Progress, resourceVersion string) error
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// Replica is this replica's id, as it records itself waiting.
	Replica string
	Fleet   Fleet
	Writer  Writer
	// Interval between two looks at the fleet; 1 s when zero.
	Interval time.Duration
	Clock    clock.WithTicker
	Logger   *slog.Logger
}

// Driver advances the rollout of the plan the watch loop hands it, by
// the agents this replica serves, and reports where it stands.
type Driver struct {
	cfg DriverConfig

	mu     sync.Mutex
	plan   *Plan
	status *switchyardv1.GetRolloutResponse
	// step is the rollout step this replica saw start, at started;
	// readySince is when every reached node it serves became applied.
	step       stepKey
	started    time.Time
	readySince time.Time
	// written is the Progress last written (its String), not yet seen
	// back.
	written string
}

// NewDriver returns a Driver with no plan; Run drives it.
func NewDriver(cfg DriverConfig) *Driver {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Driver{cfg: cfg, status: &switchyardv1.GetRolloutResponse{State: "none"}}
}

// SetPlan hands the Driver the plan the Index now sends.
func (d *Driver) SetPlan(p Plan) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.plan = &p
}

// Status is the rollout as this replica sees it.
func (d *Driver) Status() *switchyardv1.GetRolloutResponse {
	d.mu.Lock()
	defer d.mu.Unlock()
	return proto.CloneOf(d.status)
}

// Run looks at the fleet every Interval until ctx is cancelled.
func (d *Driver) Run(ctx context.Context) error {
	t := d.cfg.Clock.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C():
			d.Tick(ctx)
		}
	}
}

// Tick looks at the fleet once: it updates Status and writes the next
// Progress when a step is done or must halt.
func (d *Driver) Tick(ctx context.Context) {
	d.mu.Lock()
	plan := d.plan
	d.mu.Unlock()
	if plan == nil || plan.Spec == nil {
		d.setStatus(&switchyardv1.GetRolloutResponse{State: "none", Summary: "no rollout"})
		return
	}
	now := d.cfg.Clock.Now()
	st, next := d.evaluate(plan, d.cfg.Fleet(), now)
	d.setStatus(st)
	if next == nil || next.String() == d.written {
		return
	}
	if err := d.cfg.Writer.WriteProgress(ctx, *next, plan.ResourceVersion); err != nil {
		d.cfg.Logger.Warn("cannot record rollout progress; trying again", "rollout", plan.Spec.Name, "progress", next.String(), "err", err)
		return
	}
	d.written = next.String()
	d.cfg.Logger.Info("rollout progress", "rollout", plan.Spec.Name, "step", next.Step, "halted", next.Halted)
}

func (d *Driver) setStatus(st *switchyardv1.GetRolloutResponse) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status = st
}

// evaluate decides where the plan's step stands by the reports, and the
// Progress to write (nil for none): a halt; this replica waiting for the
// reached nodes it serves, or done waiting; the next step, once every
// reached node it serves (one at least) stayed applied and healthy
// through the pause and no other replica waits.
func (d *Driver) evaluate(plan *Plan, reports map[string]NodeReport, now time.Time) (*switchyardv1.GetRolloutResponse, *Progress) {
	prog := plan.Progress
	if prog.step() != d.step {
		d.step, d.started, d.readySince = prog.step(), now, time.Time{}
	}
	st := &switchyardv1.GetRolloutResponse{
		Name:               plan.Spec.Name,
		Step:               uint32(prog.Step),
		TargetSettingsHash: plan.TargetHash(),
		BaseSettingsHash:   plan.baseHash,
		TotalNodes:         uint32(len(plan.Steps[len(plan.Steps)-1].Nodes)),
		StepStarted:        timestamppb.New(d.started),
		Replica:            d.cfg.Replica,
	}
	for _, s := range plan.Steps {
		st.Steps = append(st.Steps, &switchyardv1.RolloutStep{Name: s.Name, Nodes: uint32(len(s.Nodes))})
	}
	reached := plan.Reached()
	st.ReachedNodes = uint32(len(reached))
	var halt string
	pending, served := 0, 0
	for _, name := range reached {
		state, detail := nodeState(plan, name, reports[name], d.started)
		switch state {
		case "applied":
			st.AppliedNodes++
		case "pending":
			pending++
		case "nacked", "unhealthy":
			if halt == "" {
				halt = name + " " + detail
			}
		}
		if state != "not-connected" {
			served++
		}
		st.Nodes = append(st.Nodes, &switchyardv1.RolloutNode{Name: name, State: state, Detail: detail})
	}
	others := prog.waitingOthers(d.cfg.Replica, now)
	st.WaitingReplicas = others
	if pending > 0 {
		st.WaitingReplicas = append([]string{d.cfg.Replica}, others...)
	}
	step := plan.Steps[prog.Step]
	last := prog.Step == len(plan.Steps)-1
	_, waitingHere := prog.Waiting[d.cfg.Replica]
	var next *Progress
	switch {
	case prog.Halted != "":
		st.State, st.HaltReason = "halted", prog.Halted
	case halt != "":
		st.State, st.HaltReason = "halted", halt
		p := prog.with(d.cfg.Replica, false, now)
		p.Halted = halt
		next = &p
	case pending > 0:
		st.State, d.readySince = "progressing", time.Time{}
		if !last && (!waitingHere || now.Sub(prog.Waiting[d.cfg.Replica]) >= RefreshWaiting) {
			p := prog.with(d.cfg.Replica, true, now)
			next = &p
		}
	case last:
		st.State = "complete"
	case waitingHere:
		// Done waiting: say so, so that the others may move on.
		st.State = "progressing"
		p := prog.with(d.cfg.Replica, false, now)
		next = &p
	case len(others) > 0 || served == 0:
		// Another replica waits for its nodes, or this one serves none
		// of the step's: the replica that serves them moves it on.
		st.State, d.readySince = "progressing", time.Time{}
	default:
		if d.readySince.IsZero() {
			d.readySince = now
		}
		st.State = "pausing"
		if now.Sub(d.readySince) >= plan.Spec.Pause {
			next = &Progress{Name: prog.Name, Step: prog.Step + 1}
		}
	}
	st.Summary = fmt.Sprintf("rollout %s %s at step %d/%d (%s): %d of %d nodes reached, applied on %d of the %d this replica serves",
		plan.Spec.Name, st.State, prog.Step+1, len(plan.Steps), step.Name, st.ReachedNodes, st.TotalNodes, st.AppliedNodes, served)
	if len(others) > 0 && st.State == "progressing" {
		st.Summary += "; waiting for replica " + strings.Join(others, ", ")
	}
	if st.HaltReason != "" {
		st.Summary += ": " + st.HaltReason
	}
	return st, next
}

// nodeState is one reached node's state: "not-connected" when this
// replica serves no agent of it; "nacked" when it rejected a view since
// the step began; "pending" until it programs the settings the plan
// gives it; "unhealthy" when it does and its datapath probe has failed
// since the step began; else "applied".
func nodeState(plan *Plan, name string, r NodeReport, started time.Time) (string, string) {
	switch {
	case !r.Connected:
		return "not-connected", ""
	case r.LastNack.After(started):
		return "nacked", "rejected its view: " + r.NackMessage
	case r.SettingsHash != plan.SettingsHash(name):
		return "pending", "programs settings " + r.SettingsHash
	case r.Datapath != nil && !r.Datapath.GetHealthy() && r.Datapath.GetLastProbe().AsTime().After(started):
		return "unhealthy", "datapath probe failing: " + r.Datapath.GetError()
	}
	return "applied", ""
}

// NodeSource says where the plan's settings of the node come from:
// "label", "rollout", or "" for the cluster's.
func (d *Driver) NodeSource(node string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.plan == nil {
		return ""
	}
	return d.plan.Source[node]
}
