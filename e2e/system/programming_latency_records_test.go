package system_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// hist is a histogram's count and sum (seconds).
type hist struct{ count, sum float64 }

// histOf reads histogram name from a scrape; an error when not exposed.
func histOf(m map[string]float64, name string) (hist, error) {
	count, ok := m[name+"_count"]
	if !ok {
		return hist{}, fmt.Errorf("%s not exposed", name)
	}
	return hist{count, m[name+"_sum"]}, nil
}

func (h hist) minus(o hist) hist { return hist{h.count - o.count, h.sum - o.sum} }

// latencyRecords is one reading of every record of programming latency.
type latencyRecords struct {
	agents  map[string]hist // by node name
	cp      hist
	invalid float64 // invalidTriggerMetric
	nodes   map[string]*switchyardv1.NodeStatus
}

// latencyRecords scrapes every agent and the control plane, and lists
// the nodes.
func (e *env) latencyRecords(ctx context.Context) (latencyRecords, error) {
	r := latencyRecords{agents: map[string]hist{}}
	for _, n := range e.c.Topo.Nodes() {
		out, err := e.c.Topo.Exec(ctx, n.NS, "curl", "-sf", agentMetricsURL)
		m, perr := launch.ParseMetrics(bytes.NewReader(out))
		if err = errors.Join(err, perr); err == nil {
			r.agents[n.Name], err = histOf(m, agentLatencyMetric)
		}
		if err != nil {
			return r, fmt.Errorf("%s's agent metrics: %w", n.Name, err)
		}
	}
	m, err := e.c.ControlPlaneMetrics(ctx, e.replica)
	if err != nil {
		return r, err
	}
	if r.cp, err = histOf(m, cpLatencyMetric); err != nil {
		return r, fmt.Errorf("control plane: %w", err)
	}
	r.invalid = m[invalidTriggerMetric]
	r.nodes, err = e.nodes(ctx)
	return r, err
}

// lastTime is when ListNodes says node's agent last reported a latency
// (the Unix epoch when it never did).
func (r latencyRecords) lastTime(node string) time.Time {
	return r.nodes[node].GetLastProgrammingLatencyTime().AsTime()
}

// sameAs reports whether r and o hold the same observations.
func (r latencyRecords) sameAs(o latencyRecords) bool {
	for name, h := range r.agents {
		if o.agents[name] != h || !r.lastTime(name).Equal(o.lastTime(name)) {
			return false
		}
	}
	return r.cp == o.cp
}

// String is the counts and sums: agents by node, then the control plane.
func (r latencyRecords) String() string {
	return fmt.Sprint("agents ", r.agents, " control plane ", r.cp)
}

// steadyRecords waits until every node acked its desired version and two
// readings 250 ms apart agree (setup's own observations all in), and
// returns the reading.
func (e *env) steadyRecords(t *testing.T, step string) latencyRecords {
	t.Helper()
	e.settled(t, step+"-setup")
	var last latencyRecords
	read := false
	err := pollEvery(t.Context(), time.Minute, 250*time.Millisecond, func() (bool, string) {
		r, err := e.latencyRecords(t.Context())
		if err != nil {
			return false, err.Error()
		}
		same := read && r.sameAs(last)
		last, read = r, true
		return same, r.String()
	})
	if err != nil {
		t.Fatalf("latency records steady before %s: %v", step, err)
	}
	return last
}

// observed is what one step must add: per node, the observations its
// agent makes (a node left out: none).
type observed map[string]int

// checkObserved waits until the step's observations arrived, watches
// quietFor for more, and checks the records against before: per agent
// exactly want's count, each value in (0, bound]; the control plane one
// per ACK that carries a latency (a node with observations), with the
// values the agents observed; ListNodes' last report newer, with that
// value, only where the agent observed. It returns the final reading.
func (e *env) checkObserved(t *testing.T, step string, before latencyRecords, want observed, bound time.Duration) latencyRecords {
	t.Helper()
	ctx := t.Context()
	acks := 0
	for _, n := range want {
		acks += min(n, 1)
	}
	err := poll(ctx, 30*time.Second, func() (bool, string) {
		r, err := e.latencyRecords(ctx)
		if err != nil {
			return false, err.Error()
		}
		for name, n := range want {
			if r.agents[name].count < before.agents[name].count+float64(n) {
				return false, r.String()
			}
		}
		return r.cp.count >= before.cp.count+float64(acks), r.String()
	})
	if err != nil {
		t.Fatalf("%s: observations did not arrive: %v", step, err)
	}
	time.Sleep(quietFor) // no more may come: a fixed wait that shows nothing happens
	after, err := e.latencyRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var agentsSum float64
	for _, n := range e.c.Topo.Nodes() {
		d := after.agents[n.Name].minus(before.agents[n.Name])
		t.Logf("latency step=%s node=%s agent count %v→%v sum %.4f→%.4f (+%.4fs) bound=%v", step, n.Name,
			before.agents[n.Name].count, after.agents[n.Name].count, before.agents[n.Name].sum, after.agents[n.Name].sum,
			d.sum, bound.Round(time.Millisecond))
		checkHist(t, step+" "+n.Name+"'s agent", d, want[n.Name], bound)
		e.checkLastReport(t, step, n.Name, before, after, want[n.Name] > 0, d.sum)
		agentsSum += d.sum
	}
	d := after.cp.minus(before.cp)
	t.Logf("latency step=%s control plane count %v→%v sum %.4f→%.4f (+%.4fs)", step,
		before.cp.count, after.cp.count, before.cp.sum, after.cp.sum, d.sum)
	checkHist(t, step+" control plane", d, acks, bound)
	if math.Abs(d.sum-agentsSum) > float64(acks)*sameLatency.Seconds() {
		t.Errorf("%s: the control plane observed %.4fs in all, the agents %.4fs", step, d.sum, agentsSum)
	}
	return after
}

// checkHist checks a histogram's delta: n observations, each in (0, bound].
func checkHist(t *testing.T, what string, d hist, n int, bound time.Duration) {
	t.Helper()
	switch {
	case d.count != float64(n):
		t.Errorf("%s: %v new observations (+%.4fs), want %d", what, d.count, d.sum, n)
	case n == 0 && d.sum != 0:
		t.Errorf("%s: sum moved by %.4fs without an observation", what, d.sum)
	case n > 0 && (d.sum <= 0 || d.sum > float64(n)*bound.Seconds()):
		t.Errorf("%s: %d observations summing %.4fs, want each in (0, %v]", what, n, d.sum, bound)
	}
}

// checkLastReport checks ListNodes' last reported latency of node: newer
// and equal to the agent's observation (value) when it observed, else not
// newer than before.
func (e *env) checkLastReport(t *testing.T, step, node string, before, after latencyRecords, observed bool, value float64) {
	t.Helper()
	was, now := before.lastTime(node), after.lastTime(node)
	latency := after.nodes[node].GetLastProgrammingLatency().AsDuration()
	t.Logf("latency step=%s node=%s last_programming_latency_time %s→%s last_programming_latency=%v", step, node,
		was.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano), latency)
	switch {
	case !observed && now.After(was):
		t.Errorf("%s: ListNodes shows a new latency report from %s (%v at %s), want none", step, node, latency, now)
	case observed && !now.After(was):
		t.Errorf("%s: ListNodes shows no new latency report from %s (last at %s)", step, node, now)
	case observed && (latency-time.Duration(value*float64(time.Second))).Abs() > sameLatency:
		t.Errorf("%s: ListNodes says %s reported %v, its agent observed %.4fs", step, node, latency, value)
	}
}
