package system_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// windowGap joins failed connections into one window: two failures at
// most this far apart belong to the same trouble.
const windowGap = 2 * time.Second

// msDuration is a duration that JSON writes as milliseconds (0.1 ms).
type msDuration time.Duration

func (d msDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(math.Round(float64(d)/float64(100*time.Microsecond)) / 10)
}

// String is short and stable for tables: "850 ms", "12.34 s".
func (d msDuration) String() string {
	if time.Duration(d) < time.Second {
		return fmt.Sprintf("%d ms", time.Duration(d).Milliseconds())
	}
	return fmt.Sprintf("%.2f s", time.Duration(d).Seconds())
}

// stats summarise durations: nearest-rank percentiles.
type stats struct {
	N   int        `json:"n"`
	P50 msDuration `json:"p50Ms"`
	P99 msDuration `json:"p99Ms"`
	Max msDuration `json:"maxMs"`
}

func statsOf(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	ds = slices.Sorted(slices.Values(ds))
	rank := func(p float64) msDuration { return msDuration(ds[int(math.Ceil(p*float64(len(ds))))-1]) }
	return stats{N: len(ds), P50: rank(0.50), P99: rank(0.99), Max: msDuration(ds[len(ds)-1])}
}

// soakReport is soak.json; markdown renders soak.md from it.
type soakReport struct {
	Repeat       string           `json:"repeat"` // the command that runs this schedule again
	Commit       string           `json:"commit"`
	Started      time.Time        `json:"started"`
	Seed         uint64           `json:"seed"`
	Duration     msDuration       `json:"durationMs"` // of fault injection
	Elapsed      msDuration       `json:"elapsedMs"`  // until the final checks were done
	Cluster      string           `json:"cluster"`
	Traffic      trafficSummary   `json:"traffic"`
	FaultsByKind []faultSummary   `json:"faultsByKind"`
	Convergence  []convergenceRow `json:"convergence"`
	Slowest      []slowChange     `json:"slowest"`
	Violations   []string         `json:"violations"`
	Faults       []faultRecord    `json:"faults"`
	Changes      []changeRecord   `json:"changes"`
}

type faultSummary struct {
	Kind      string `json:"kind"`
	Injected  int    `json:"injected"`
	Recovered int    `json:"recovered"`
	Down      stats  `json:"down"`
	Restart   stats  `json:"restart"`  // restart → the harness saw it ready
	Recovery  stats  `json:"recovery"` // restart → back in service
	Failover  *stats `json:"failover,omitempty"`
}

type trafficSummary struct {
	Target    string          `json:"target"`
	Rate      int             `json:"rate"`
	Timeout   msDuration      `json:"timeoutMs"`
	Attempted int             `json:"attempted"`
	Failed    int             `json:"failed"`
	Skipped   int             `json:"skipped"` // ticks with every slot busy
	BySource  []sourceSummary `json:"bySource"`
	Reasons   map[string]int  `json:"reasons"`
	Windows   []failureWindow `json:"windows"`
}

type sourceSummary struct {
	Source    string `json:"source"`
	Rate      int    `json:"rate"`
	Attempted int    `json:"attempted"`
	Failed    int    `json:"failed"`
	Skipped   int    `json:"skipped"`
	Error     string `json:"error,omitempty"`
}

// failureWindow is a run of failed connections and what came before it.
type failureWindow struct {
	Start      msDuration     `json:"startMs"`
	End        msDuration     `json:"endMs"`
	Failures   int            `json:"failures"`
	BySource   map[string]int `json:"bySource"`
	Reasons    map[string]int `json:"reasons"`
	FirstError string         `json:"firstError"`
	// AfterFault is the last kill or restart at or before Start; InProgress
	// the faults between kill and recovery at Start; AfterChange the last
	// API write before Start.
	AfterFault  *eventRef `json:"afterFault,omitempty"`
	InProgress  []string  `json:"inProgress,omitempty"`
	AfterChange *eventRef `json:"afterChange,omitempty"`
}

type eventRef struct {
	Event  string     `json:"event"`
	Before msDuration `json:"beforeMs"`
}

// slowChange is one of the slowest changes, with the faults its
// convergence overlapped.
type slowChange struct {
	Seq        int        `json:"seq"`
	Change     string     `json:"change"`
	At         msDuration `json:"atMs"`
	Node       string     `json:"node"` // the slowest
	ToAck      msDuration `json:"toAckMs"`
	ToTraffic  msDuration `json:"toTrafficMs"`
	InProgress []string   `json:"inProgress"`
}

type convergenceRow struct {
	Changes   string `json:"changes"`
	Written   int    `json:"written"`
	Converged int    `json:"converged"`
	ToAck     stats  `json:"toAck"`
	ToTraffic stats  `json:"toTraffic"`
	Both      stats  `json:"both"` // the later of the two, per change
}

// report builds the report from what the soak recorded.
func (s *soak) report(streams []streamResult) *soakReport {
	s.mu.Lock()
	faults, changes, broken := slices.Clone(s.faults), slices.Clone(s.changes), slices.Clone(s.broken)
	s.mu.Unlock()
	slices.SortFunc(faults, func(a, b faultRecord) int { return cmp.Compare(a.KilledAt, b.KilledAt) })
	for i := range faults {
		faults[i].Seq = i + 1
	}
	end := time.Since(s.start)
	r := &soakReport{
		Repeat: fmt.Sprintf("cd e2e && %s=1 %s=%v %s=%d %s=%d go test -count=1 -timeout 0 -run '^TestSoak$' -v ./system/",
			envSoak, envSoakDuration, s.cfg.duration, envSoakSeed, s.cfg.seed, envSoakRate, s.cfg.rate),
		Commit: commit(), Started: s.start.UTC(), Seed: s.cfg.seed,
		Duration: msDuration(s.cfg.duration), Elapsed: msDuration(end),
		Cluster: fmt.Sprintf("%d nodes, %d pods, %d control-plane replicas, mTLS, iptables mode",
			len(s.c.NodeNames()), len(s.c.Topo.Pods()), len(s.c.ControlPlaneTargets())),
		Faults: faults, Changes: changes,
	}
	r.Traffic = trafficReport(s.start, streams, faults, changes, end)
	r.Traffic.Target = s.c.VIP().String()
	for _, src := range r.Traffic.BySource {
		if src.Error != "" {
			broken = append(broken, fmt.Sprintf("the stream from %s stopped: %s", src.Source, src.Error))
		}
	}
	r.Violations = append([]string{}, broken...)
	r.FaultsByKind = faultSummaries(faults)
	r.Convergence = convergenceRows(changes, faults, end)
	r.Slowest = slowest(changes, faults, end, 5)
	return r
}

func faultSummaries(faults []faultRecord) []faultSummary {
	var out []faultSummary
	for _, kind := range faultKinds {
		sum := faultSummary{Kind: kind}
		var down, restart, recovery, failover []time.Duration
		for _, f := range faults {
			if f.Kind != kind {
				continue
			}
			sum.Injected++
			down = append(down, time.Duration(f.Down))
			if f.Recovered {
				sum.Recovered++
				restart, recovery = append(restart, time.Duration(f.RestartTook)), append(recovery, time.Duration(f.Recovery))
			}
			if f.Failover != nil {
				failover = append(failover, time.Duration(*f.Failover))
			}
		}
		sum.Down, sum.Restart, sum.Recovery = statsOf(down), statsOf(restart), statsOf(recovery)
		if kind == kindControlPlane {
			st := statsOf(failover)
			sum.Failover = &st
		}
		out = append(out, sum)
	}
	return out
}

func trafficReport(start time.Time, streams []streamResult, faults []faultRecord, changes []changeRecord, end time.Duration) trafficSummary {
	sum := trafficSummary{Timeout: msDuration(attemptTimout), Reasons: map[string]int{}}
	for _, st := range streams {
		src := sourceSummary{Source: st.source, Rate: st.rate, Attempted: st.res.Attempts, Failed: len(st.res.Failures), Skipped: st.res.Skipped}
		if st.err != nil {
			src.Error = st.err.Error()
		}
		sum.Rate += st.rate
		sum.Attempted, sum.Failed, sum.Skipped = sum.Attempted+src.Attempted, sum.Failed+src.Failed, sum.Skipped+src.Skipped
		sum.BySource = append(sum.BySource, src)
	}
	fails := failures(start, streams)
	for _, f := range fails {
		sum.Reasons[string(f.reason)]++
	}
	sum.Windows = windows(fails, faults, changes, end)
	return sum
}

// windows groups failures (in time order) and names what preceded each
// group.
func windows(fails []failedConn, faults []faultRecord, changes []changeRecord, end time.Duration) []failureWindow {
	type event struct {
		at   time.Duration
		what string
	}
	var events []event
	for _, f := range faults {
		events = append(events, event{time.Duration(f.KilledAt), "kill " + f.Target})
		if f.RestartedAt > 0 {
			events = append(events, event{time.Duration(f.RestartedAt), "restart " + f.Target})
		}
	}
	slices.SortFunc(events, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	var out []failureWindow
	for i := 0; i < len(fails); {
		j := i + 1
		for j < len(fails) && fails[j].at-fails[j-1].at <= windowGap {
			j++
		}
		group := fails[i:j]
		start := group[0].at
		w := failureWindow{Start: msDuration(start), End: msDuration(group[len(group)-1].at), Failures: len(group),
			BySource: map[string]int{}, Reasons: map[string]int{}, FirstError: group[0].err}
		for _, f := range group {
			w.BySource[f.source]++
			w.Reasons[string(f.reason)]++
		}
		if k := lastBefore(events, start, func(e event) time.Duration { return e.at }); k >= 0 {
			w.AfterFault = &eventRef{Event: events[k].what, Before: msDuration(start - events[k].at)}
		}
		for _, f := range faults {
			if time.Duration(f.KilledAt) <= start && start <= f.end(end) {
				w.InProgress = append(w.InProgress, f.Target)
			}
		}
		if k := lastBefore(changes, start, func(c changeRecord) time.Duration { return time.Duration(c.At) }); k >= 0 {
			c := changes[k]
			w.AfterChange = &eventRef{Event: c.Kind + " " + c.Service, Before: msDuration(start - time.Duration(c.At))}
		}
		out = append(out, w)
		i = j
	}
	return out
}

// lastBefore is the index of the last of xs (in time order) at or before
// t, or -1.
func lastBefore[T any](xs []T, t time.Duration, at func(T) time.Duration) int {
	k := -1
	for i, x := range xs {
		if at(x) > t {
			break
		}
		k = i
	}
	return k
}

// overlapping lists the faults in progress at some time while c converged.
func overlapping(c changeRecord, faults []faultRecord, end time.Duration) []string {
	from, to := time.Duration(c.At), time.Duration(c.At)+c.took()
	var out []string
	for _, f := range faults {
		if time.Duration(f.KilledAt) <= to && from <= f.end(end) {
			out = append(out, f.Target)
		}
	}
	return out
}

// slowest returns the n slowest written changes, slowest first.
func slowest(changes []changeRecord, faults []faultRecord, end time.Duration, n int) []slowChange {
	written := slices.DeleteFunc(slices.Clone(changes), func(c changeRecord) bool { return c.Error != "" })
	slices.SortStableFunc(written, func(a, b changeRecord) int { return cmp.Compare(b.took(), a.took()) })
	var out []slowChange
	for _, c := range written[:min(n, len(written))] {
		sc := slowChange{Seq: c.Seq, Change: c.Kind + " " + c.Service, At: c.At, InProgress: overlapping(c, faults, end)}
		for _, nc := range c.Nodes {
			if sc.Node == "" || max(nc.ToAck, nc.ToTraffic) > max(sc.ToAck, sc.ToTraffic) {
				sc.Node, sc.ToAck, sc.ToTraffic = nc.Node, nc.ToAck, nc.ToTraffic
			}
		}
		out = append(out, sc)
	}
	return out
}

// convergenceRows summarise the changes that were written: all, by kind,
// and split by whether a fault was in progress while they converged.
func convergenceRows(changes []changeRecord, faults []faultRecord, end time.Duration) []convergenceRow {
	underFault := func(c changeRecord) bool { return len(overlapping(c, faults, end)) > 0 }
	groups := []struct {
		name string
		keep func(changeRecord) bool
	}{
		{"all", func(changeRecord) bool { return true }},
		{changeScale, func(c changeRecord) bool { return c.Kind == changeScale }},
		{changeAdd, func(c changeRecord) bool { return c.Kind == changeAdd }},
		{changeRemove, func(c changeRecord) bool { return c.Kind == changeRemove }},
		{"no fault in progress", func(c changeRecord) bool { return !underFault(c) }},
		{"a fault in progress", underFault},
	}
	var out []convergenceRow
	for _, g := range groups {
		row := convergenceRow{Changes: g.name}
		var ack, traffic, both []time.Duration
		for _, c := range changes {
			if c.Error != "" || !g.keep(c) {
				continue
			}
			row.Written++
			if c.Converged {
				row.Converged++
			}
			ack, traffic, both = append(ack, time.Duration(c.ToAck)), append(traffic, time.Duration(c.ToTraffic)), append(both, c.took())
		}
		row.ToAck, row.ToTraffic, row.Both = statsOf(ack), statsOf(traffic), statsOf(both)
		out = append(out, row)
	}
	return out
}

// write puts soak.json and soak.md into dir.
func (r *soakReport) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("soak output: %w", err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode soak.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("write soak.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.md"), []byte(r.markdown()), 0o644); err != nil {
		return fmt.Errorf("write soak.md: %w", err)
	}
	return nil
}

// counts renders a map as "a 3, b 1", largest first.
func counts(m map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", k, m[k])
	}
	return out
}
