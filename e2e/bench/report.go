package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteJSON writes one record per line.
func WriteJSON(w io.Writer, recs []Record) error {
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
	return nil
}

// ReadJSON reads records written by WriteJSON.
func ReadJSON(r io.Reader) ([]Record, error) {
	var out []Record
	dec := json.NewDecoder(r)
	for dec.More() {
		var rec Record
		if err := dec.Decode(&rec); err != nil {
			return nil, fmt.Errorf("read record: %w", err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// group is the runs of one configuration.
type group struct {
	key  string
	recs []Record
}

func groupBy(recs []Record, key func(Record) string) []group {
	var out []group
	idx := map[string]int{}
	for _, r := range recs {
		k := key(r)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, group{key: k})
		}
		out[i].recs = append(out[i].recs, r)
	}
	return out
}

func fanoutKey(r Record) string {
	return fmt.Sprintf("%s|%d|%d|%d|%s", r.Path, r.Agents, r.Services, r.Endpoints, r.Mode)
}

// stat formats min / median of one field over the runs.
func stat(recs []Record, f func(Record) float64, format func(float64) string) string {
	xs := make([]float64, len(recs))
	for i, r := range recs {
		xs[i] = f(r)
	}
	if len(xs) == 1 {
		return format(xs[0])
	}
	return format(slices.Min(xs)) + " / " + format(median(xs))
}

func medianOf(recs []Record, f func(Record) float64) float64 {
	xs := make([]float64, len(recs))
	for i, r := range recs {
		xs[i] = f(r)
	}
	return median(xs)
}

func fmtMS(v float64) string  { return fmt.Sprintf("%.1f", v) }
func fmtSec(v float64) string { return fmt.Sprintf("%.2f", v) }
func fmtMiB(v float64) string { return fmt.Sprintf("%.0f", v/(1<<20)) }
func fmtCPU(v float64) string { return fmt.Sprintf("%.1f", v*1000) }

func fmtBytes(v float64) string {
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%.2f GiB", v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

// Markdown writes the fan-out table, the state-of-the-world/delta ratios
// and the API-load table. Cells with several runs read "min / median".
func Markdown(w io.Writer, recs []Record) error {
	var b strings.Builder
	var fan, api []Record
	for _, r := range recs {
		if r.Kind == "apiload" {
			api = append(api, r)
		} else {
			fan = append(fan, r)
		}
	}
	slices.SortStableFunc(fan, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Services*a.Endpoints, b.Services*b.Endpoints),
			cmp.Compare(a.Services, b.Services), cmp.Compare(a.Agents, b.Agents), cmp.Compare(a.Mode, b.Mode))
	})
	if len(fan) > 0 {
		writeFanout(&b, fan)
		writeRatios(&b, fan)
	}
	if len(api) > 0 {
		writeAPILoad(&b, api)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFanout(b *strings.Builder, recs []Record) {
	b.WriteString("### Fan-out: one endpoint changes, every agent ACKs\n\n")
	b.WriteString("Cells: min / median over runs. Latency: change written → agent's ACK sent, over every (agent, change). " +
		"All acked: until the last agent's ACK, median of changes. Bytes: wire size (proto.Size) received by all agents for one change. " +
		"CP: the control-plane process alone (/proc); on path fake it also holds the in-memory clientset.\n\n")
	b.WriteString("| path | agents | services × endpoints | mode | runs | p50 ms | p99 ms | max ms | all acked ms | bytes/change | bytes/agent/change | CP CPU ms/change | CP CPU s to sync | initial sync s | CP peak RSS MiB, median: to sync / during changes | CP heap in use MiB |\n")
	b.WriteString("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, g := range groupBy(recs, fanoutKey) {
		r, rs := g.recs[0], g.recs
		fmt.Fprintf(b, "| %s | %d | %s × %d | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n",
			r.Path, r.Agents, count(r.Services), r.Endpoints, r.Mode, len(rs),
			stat(rs, func(r Record) float64 { return r.LatencyP50MS }, fmtMS),
			stat(rs, func(r Record) float64 { return r.LatencyP99MS }, fmtMS),
			stat(rs, func(r Record) float64 { return r.LatencyMaxMS }, fmtMS),
			stat(rs, func(r Record) float64 { return r.AllAckedMS }, fmtMS),
			stat(rs, func(r Record) float64 { return float64(r.BytesPerChange) }, fmtBytes),
			stat(rs, func(r Record) float64 { return r.BytesPerAgentChange }, fmtBytes),
			stat(rs, func(r Record) float64 { return r.CPUPerChangeSec }, fmtCPU),
			stat(rs, func(r Record) float64 { return r.CPUInitialSec }, fmtSec),
			stat(rs, func(r Record) float64 { return r.InitialSyncMS / 1000 }, fmtSec),
			fmtMiB(medianOf(rs, func(r Record) float64 { return float64(r.PeakRSS) })),
			fmtMiB(medianOf(rs, func(r Record) float64 { return float64(r.ChangePeakRSS) })),
			stat(rs, func(r Record) float64 { return float64(r.HeapInuse) }, fmtMiB))
	}
	b.WriteString("\n")
}

// writeRatios compares medians of state of the world against delta for
// each configuration that ran both.
func writeRatios(b *strings.Builder, recs []Record) {
	byKey := map[string][]Record{}
	for _, g := range groupBy(recs, fanoutKey) {
		byKey[g.key] = g.recs
	}
	var rows []string
	for _, g := range groupBy(recs, fanoutKey) {
		r := g.recs[0]
		if r.Mode != "delta" {
			continue
		}
		sotw := byKey[strings.TrimSuffix(g.key, "delta")+"sotw"]
		if len(sotw) == 0 {
			continue
		}
		ratio := func(f func(Record) float64) string {
			d := medianOf(g.recs, f)
			if d == 0 {
				return "–"
			}
			return fmt.Sprintf("%.1f×", medianOf(sotw, f)/d)
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %s × %d | %s | %s | %s | %s |", r.Path, r.Agents, count(r.Services), r.Endpoints,
			ratio(func(r Record) float64 { return float64(r.BytesPerChange) }),
			ratio(func(r Record) float64 { return r.CPUPerChangeSec }),
			ratio(func(r Record) float64 { return r.LatencyP99MS }),
			ratio(func(r Record) float64 { return r.AllAckedMS })))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("### State of the world ÷ delta (medians)\n\n")
	b.WriteString("| path | agents | services × endpoints | bytes/change | CP CPU/change | p99 latency | all acked |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|\n")
	b.WriteString(strings.Join(rows, "\n") + "\n\n")
}

func writeAPILoad(b *strings.Builder, recs []Record) {
	b.WriteString("### API load: watches held on kube-apiserver\n\n")
	b.WriteString("WATCH requests: apiserver_longrunning_requests{verb=\"WATCH\"} summed, minus the API server's own baseline " +
		"(its loopback informers). Registered watchers: apiserver_registered_watchers, same baseline; n/a where the API server no longer exposes it.\n\n")
	b.WriteString("| setup | nodes (agents / proxies) | runs | WATCH requests | registered watchers | kube-apiserver RSS MiB | note |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
	key := func(r Record) string { return fmt.Sprintf("%s|%d", r.Setup, r.Agents) }
	for _, g := range groupBy(recs, key) {
		r, rs := g.recs[0], g.recs
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %s | %s |\n", r.Setup, r.Agents, len(rs),
			stat(rs, func(r Record) float64 { return r.LongRunning }, fmtCount),
			stat(rs, func(r Record) float64 { return r.Watchers }, fmtCount),
			stat(rs, func(r Record) float64 { return float64(r.APIServerRSS) }, fmtMiB), r.Note)
	}
	b.WriteString("\n")
}

func fmtCount(v float64) string {
	if v < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}
