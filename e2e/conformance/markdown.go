package conformance

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Marks of an outcome in the spec table.
const (
	markPassed  = "✓"
	markFailed  = "✗"
	markSkipped = "–"
)

// MarkdownOptions are what CONFORMANCE.md says beyond the results.
type MarkdownOptions struct {
	// Command regenerates the file from the results (shown at the top).
	Command string
	// RunCommand is the command that produced results, given the run's
	// proxy, focus and skip ("" leaves the per-run commands out).
	RunCommand func(r Results) string
	// Notes are paragraphs after the introduction (the bed, the skips).
	Notes []string
	// Explain gives the analysis of a failure (proxy, spec) beyond
	// e2e.test's message: why it fails and what it would take; "" for none.
	Explain func(proxy, spec string) string
}

// ReadDir loads every *.json Results file in dir: first the proxies in
// order, in that order, then the others by name.
func ReadDir(dir string, order []string) ([]Results, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	var runs []Results
	for _, p := range paths {
		r, err := ReadResults(p)
		if err != nil {
			return nil, err
		}
		if r.Proxy == "" {
			r.Proxy = strings.TrimSuffix(filepath.Base(p), ".json")
		}
		runs = append(runs, r)
	}
	rank := func(proxy string) int {
		if i := slices.Index(order, proxy); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(runs, func(a, b Results) int {
		if d := rank(a.Proxy) - rank(b.Proxy); d != 0 {
			return d
		}
		return strings.Compare(a.Proxy, b.Proxy)
	})
	return runs, nil
}

// Markdown renders runs as CONFORMANCE.md: a summary per proxy (totals,
// versions, date, duration, command), then one row per spec with one
// column per proxy and the reasons of every failure and skip. The output
// depends only on runs and o.
func Markdown(runs []Results, o MarkdownOptions) string {
	var b strings.Builder
	b.WriteString("# Conformance: upstream e2e.test on the real-cluster bed\n\n")
	b.WriteString("Generated from `conformance/results/*.json`; do not edit by hand.")
	if o.Command != "" {
		fmt.Fprintf(&b, " Regenerate with `%s`.", o.Command)
	}
	b.WriteString("\n\n")
	for _, n := range o.Notes {
		b.WriteString(n + "\n\n")
	}
	if len(runs) == 0 {
		b.WriteString("No results yet.\n")
		return b.String()
	}
	writeRuns(&b, runs)
	if o.RunCommand != nil {
		writeCommands(&b, runs, o.RunCommand)
	}
	writeSpecs(&b, runs, o.Explain)
	return b.String()
}

func writeRuns(b *strings.Builder, runs []Results) {
	b.WriteString("## Runs\n\n")
	b.WriteString("| Proxy | " + markPassed + " passed | " + markFailed + " failed | " + markSkipped +
		" skipped | Specs | Focus | Kubernetes | Switchyard | Date | Duration |\n")
	b.WriteString("|---|--:|--:|--:|--:|---|---|---|---|--:|\n")
	for _, r := range runs {
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %s | %s | %s | %s | %s |\n", cell(r.Proxy),
			r.Count(Passed), r.Count(Failed), r.Count(Skipped), len(r.Specs), code(r.Focus),
			cell(orDash(r.Versions["kubernetes"])), cell(orDash(r.Versions["switchyard"])), cell(orDash(r.Date)),
			r.Elapsed.Round(time.Second))
	}
	b.WriteString("\n")
}

func writeCommands(b *strings.Builder, runs []Results, cmd func(Results) string) {
	b.WriteString("Commands and versions:\n\n```\n")
	for _, r := range runs {
		fmt.Fprintf(b, "# %s:", r.Proxy)
		for _, k := range slices.Sorted(maps.Keys(r.Versions)) {
			fmt.Fprintf(b, " %s=%s", k, r.Versions[k])
		}
		fmt.Fprintf(b, "\n%s\n", cmd(r))
	}
	b.WriteString("```\n\n")
}

func writeSpecs(b *strings.Builder, runs []Results, explain func(proxy, spec string) string) {
	b.WriteString("## Specs\n\n")
	fmt.Fprintf(b, "%s passed, %s failed, %s skipped; an empty cell: not selected in that run.\n\n",
		markPassed, markFailed, markSkipped)
	names := map[string]bool{}
	for _, r := range runs {
		for n := range r.Specs {
			names[n] = true
		}
	}
	b.WriteString("| Spec |")
	sep := "|---|"
	for _, r := range runs {
		b.WriteString(" " + cell(r.Proxy) + " |")
		sep += ":-:|"
	}
	b.WriteString(" Reason |\n" + sep + "---|\n")
	for _, name := range slices.Sorted(maps.Keys(names)) {
		b.WriteString("| " + cell(name) + " |")
		for _, r := range runs {
			s, ok := r.Specs[name]
			b.WriteString(" " + mark(s, ok) + " |")
		}
		b.WriteString(" " + reasons(runs, name, explain) + " |\n")
	}
	b.WriteString("| **Total** " + markPassed + "/" + markFailed + "/" + markSkipped + " |")
	for _, r := range runs {
		fmt.Fprintf(b, " %d/%d/%d |", r.Count(Passed), r.Count(Failed), r.Count(Skipped))
	}
	b.WriteString(" |\n")
}

func mark(s Spec, ok bool) string {
	if !ok {
		return ""
	}
	switch s.Outcome {
	case Passed:
		return markPassed
	case Failed:
		return markFailed
	case Skipped:
		return markSkipped
	}
	return cell(string(s.Outcome))
}

// reasons joins the reasons of the failures and skips of spec name, each
// once with the proxies that gave it, in the runs' order; a failure's
// reason carries explain's analysis after e2e.test's message.
func reasons(runs []Results, name string, explain func(proxy, spec string) string) string {
	var order []string
	by := map[string][]string{}
	for _, r := range runs {
		s, ok := r.Specs[name]
		if !ok || s.Outcome == Passed {
			continue
		}
		reason := s.Reason
		if reason == "" {
			reason = string(s.Outcome) + ", no reason given"
		}
		if explain != nil && s.Outcome == Failed {
			if why := explain(r.Proxy, name); why != "" {
				reason = "**" + why + "** (" + reason + ")"
			}
		}
		if _, seen := by[reason]; !seen {
			order = append(order, reason)
		}
		by[reason] = append(by[reason], r.Proxy)
	}
	parts := make([]string, len(order))
	for i, reason := range order {
		who := strings.Join(by[reason], ", ")
		if len(by[reason]) == len(runs) && len(runs) > 1 {
			who = "all"
		}
		parts[i] = who + ": " + reason
	}
	return cell(strings.Join(parts, "\n"))
}

// cell makes s safe inside a table cell: pipes escaped, lines joined by
// <br>.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "<br>")
}

// code is s as inline code in a table cell.
func code(s string) string {
	if s == "" {
		return "–"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
