package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// ginkgoReport is the part of ginkgo v2's JSON report (--ginkgo.json-report)
// read here: one Report per suite, one SpecReport per spec.
type ginkgoReport struct {
	SpecReports []struct {
		ContainerHierarchyTexts []string
		LeafNodeText            string
		LeafNodeType            string
		LeafNodeLabels          []string
		State                   string
		RunTime                 time.Duration
		Failure                 struct {
			Message  string
			Location struct{ FileName string }
		}
	}
}

// parseReport turns a ginkgo JSON report into spec outcomes. Only "It"
// leaves are specs; setup nodes (BeforeSuite, …) that fail are reported
// under their own name so a broken run is never silently empty.
// Specs the focus did not select are also "skipped", with no message:
// they are left out unless selected says the name was meant to run.
func parseReport(path string, selected func(name string) bool) (map[string]Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ginkgo report: %w", err)
	}
	var reports []ginkgoReport
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("ginkgo report %s: %w", path, err)
	}
	out := map[string]Spec{}
	for _, r := range reports {
		for _, s := range r.SpecReports {
			name := strings.TrimSpace(strings.Join(append(append([]string(nil), s.ContainerHierarchyTexts...), s.LeafNodeText), " "))
			if s.LeafNodeType != "It" {
				if s.State == "passed" || s.State == "skipped" {
					continue
				}
				name = s.LeafNodeType + " " + name
			}
			spec := Spec{Duration: s.RunTime}
			switch s.State {
			case "passed":
				spec.Outcome = Passed
			case "skipped", "pending":
				if s.Failure.Message == "" && !selected(name) {
					continue
				}
				spec.Outcome = Skipped
				spec.Reason = firstLine(s.Failure.Message)
			default: // failed, panicked, timedout, interrupted, aborted
				spec.Outcome = Failed
				spec.Reason = s.State + ": " + firstLine(s.Failure.Message)
			}
			out[name] = spec
		}
	}
	return out, nil
}
