package system_test

import (
	"fmt"
	"strconv"
	"strings"
)

// markdown renders the report as soak.md: the tables RELIABILITY.md
// quotes.
func (r *soakReport) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("## Soak: %v of faults, seed %d", r.Duration, r.Seed)
	p("")
	p("Commit `%s`, started %s, %v in all (final checks included). Cluster: %s. "+
		"Traffic: %d new TCP connections/s to %s from %s (timeout %v each).",
		r.Commit, r.Started.Format("2006-01-02 15:04 UTC"), r.Elapsed, r.Cluster,
		r.Traffic.Rate, r.Traffic.Target, sourceList(r.Traffic.BySource), r.Traffic.Timeout)
	p("")
	p("Repeat: `%s`", r.Repeat)
	p("")

	p("### Faults (SIGKILL, then a restart)")
	p("")
	var rows [][]string
	for _, f := range r.FaultsByKind {
		rows = append(rows, []string{f.Kind, strconv.Itoa(f.Injected), strconv.Itoa(f.Recovered),
			fmt.Sprintf("%v / %v", f.Down.P50, f.Down.Max), fmt.Sprintf("%v / %v", f.Restart.P50, f.Restart.Max), f.Recovery.text()})
	}
	table(&b, "kind|injected:|recovered:|down p50 / max:|restart → ready p50 / max:|restart → in service p50 / p99 / max:", rows)
	for _, f := range r.FaultsByKind {
		if f.Failover != nil && f.Failover.N > 0 {
			p("")
			p("Control-plane failover (kill → every agent acked on the other replica, %d kills that had agents): p50 %v, max %v.",
				f.Failover.N, f.Failover.P50, f.Failover.Max)
		}
	}
	p("")

	p("### Connections")
	p("")
	rows = nil
	for _, s := range r.Traffic.BySource {
		rows = append(rows, []string{s.Source, strconv.Itoa(s.Rate), strconv.Itoa(s.Attempted), strconv.Itoa(s.Failed), strconv.Itoa(s.Skipped)})
	}
	t := r.Traffic
	rows = append(rows, []string{"**all**", strconv.Itoa(t.Rate), strconv.Itoa(t.Attempted), strconv.Itoa(t.Failed), strconv.Itoa(t.Skipped)})
	table(&b, "source|rate/s:|attempted:|failed:|skipped:", rows)
	p("")
	if len(t.Windows) == 0 {
		p("No connection failed.")
	} else {
		p("Failure windows (failures at most %v apart; times since the start; a timeout counts from when its attempt began):", windowGap)
		p("")
		rows = nil
		for _, w := range t.Windows {
			rows = append(rows, []string{w.Start.String(), w.End.String(), strconv.Itoa(w.Failures), counts(w.BySource), counts(w.Reasons),
				w.AfterFault.text(), strings.Join(w.InProgress, ", "), w.AfterChange.text()})
		}
		table(&b, "from:|to:|failed:|sources|reasons|after fault|in progress|after change", rows)
	}
	p("")

	p("### Convergence (API write → every node)")
	p("")
	p("ACK: the replica each node is connected to shows the change acknowledged; traffic: connections from the node show it.")
	p("")
	rows = nil
	for _, c := range r.Convergence {
		rows = append(rows, []string{c.Changes, strconv.Itoa(c.Written), strconv.Itoa(c.Converged), c.ToAck.text(), c.ToTraffic.text(), c.Both.text()})
	}
	table(&b, "changes|written:|converged:|ACK p50 / p99 / max:|traffic p50 / p99 / max:|both p50 / p99 / max:", rows)
	p("")
	if len(r.Slowest) > 0 {
		p("The slowest (its slowest node; faults in progress while it converged):")
		p("")
		rows = nil
		for _, c := range r.Slowest {
			rows = append(rows, []string{strconv.Itoa(c.Seq), c.Change, c.At.String(), c.Node, c.ToAck.String(), c.ToTraffic.String(),
				strings.Join(c.InProgress, ", ")})
		}
		table(&b, "#:|change|at:|node|ACK:|traffic:|in progress", rows)
		p("")
	}

	p("### Invariants")
	p("")
	if len(r.Violations) == 0 {
		p("None broken: every process came back and returned to service, every change reached every node, and the cluster settled after the last fault.")
	}
	for _, v := range r.Violations {
		p("- %s", v)
	}
	return b.String()
}

// table writes a markdown table: head names the columns, "|"-separated,
// a trailing ":" aligning one right.
func table(b *strings.Builder, head string, rows [][]string) {
	cols := strings.Split(head, "|")
	names, align := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		name, right := strings.CutSuffix(c, ":")
		names[i], align[i] = name, "---"
		if right {
			align[i] = "---:"
		}
	}
	for _, row := range append([][]string{names, align}, rows...) {
		fmt.Fprintf(b, "| %s |\n", strings.Join(row, " | "))
	}
}

// text renders stats for a table cell: "p50 / p99 / max".
func (s stats) text() string { return fmt.Sprintf("%v / %v / %v", s.P50, s.P99, s.Max) }

// text renders an event reference for a table cell.
func (e *eventRef) text() string {
	if e == nil {
		return "—"
	}
	return fmt.Sprintf("%s, %v before", e.Event, e.Before)
}

func sourceList(srcs []sourceSummary) string {
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Source
	}
	return strings.Join(names, ", ")
}
