package conformance

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// Outcome of one spec.
type Outcome string

// Outcomes.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
)

// Spec is one spec's result.
type Spec struct {
	Outcome  Outcome       `json:"outcome"`
	Reason   string        `json:"reason,omitempty"` // why it failed or was skipped
	Duration time.Duration `json:"durationNs"`
}

// Results are one run of the suite against one proxy.
type Results struct {
	Proxy    string            `json:"proxy"`    // e.g. "switchyard-iptables", "kube-proxy-nftables"
	Versions map[string]string `json:"versions"` // kubernetes, e2e.test, switchyard commit
	Date     string            `json:"date"`
	Focus    string            `json:"focus"`
	Skip     string            `json:"skip,omitempty"`
	Elapsed  time.Duration     `json:"elapsedNs"`
	Specs    map[string]Spec   `json:"specs"`
}

// Count returns how many specs had outcome o.
func (r Results) Count(o Outcome) int {
	n := 0
	for _, s := range r.Specs {
		if s.Outcome == o {
			n++
		}
	}
	return n
}

// Names returns the spec names, sorted.
func (r Results) Names() []string { return slices.Sorted(maps.Keys(r.Specs)) }

// Summary is "passed=N failed=N skipped=N in D".
func (r Results) Summary() string {
	return fmt.Sprintf("%s: passed=%d failed=%d skipped=%d in %v", r.Proxy,
		r.Count(Passed), r.Count(Failed), r.Count(Skipped), r.Elapsed.Round(time.Second))
}

// Write stores r as indented JSON (stable key order) at path.
func (r Results) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// ReadResults loads a Results file.
func ReadResults(path string) (Results, error) {
	var r Results
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("results: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("results %s: %w", path, err)
	}
	return r, nil
}

// Diff lists the specs whose outcome differs between old and new, one line
// each ("spec: passed → failed"), sorted.
func Diff(old, new Results) []string {
	var out []string
	names := map[string]bool{}
	for n := range old.Specs {
		names[n] = true
	}
	for n := range new.Specs {
		names[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		o, okOld := old.Specs[n]
		c, okNew := new.Specs[n]
		switch {
		case !okOld:
			out = append(out, fmt.Sprintf("+ %s: %s", n, c.Outcome))
		case !okNew:
			out = append(out, fmt.Sprintf("- %s (was %s)", n, o.Outcome))
		case o.Outcome != c.Outcome:
			out = append(out, fmt.Sprintf("%s: %s → %s", n, o.Outcome, c.Outcome))
		}
	}
	return out
}

// firstLine trims a failure message to its first line.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
