package ipvs

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// guestTest is one top-level test as the guest's `-test.v` output shows it.
type guestTest struct {
	Name    string
	Status  string // PASS, FAIL, SKIP; empty when the guest stopped during it
	Elapsed string
	Output  []string // its lines, subtests' results included
}

// guestBench is one benchmark result line.
type guestBench struct {
	Name    string
	N       int
	Metrics map[string]float64 // by unit: "ns/op", "apply-s", …
}

// guestReport is what the console says about the guest's tests.
type guestReport struct {
	Tests      []*guestTest
	Benchmarks []guestBench
	// Exit is the status of the test binary ("SWITCHYARD-GUEST-EXIT"),
	// -1 when the console has none.
	Exit int
}

var (
	runLine    = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	resultLine = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+s)\)`)
	benchLine  = regexp.MustCompile(`^(Benchmark\S+)\s+(\d+)\s+(.*)$`)
	exitLine   = regexp.MustCompile(`^SWITCHYARD-GUEST-EXIT (-?\d+)`)
)

// parseGuest reads a console carrying `go test -test.v` output. Lines
// belong to the top-level test last named by a === line, until its ---
// result line.
func parseGuest(console string) guestReport {
	rep := guestReport{Exit: -1}
	byName := map[string]*guestTest{}
	var cur *guestTest
	for _, line := range strings.Split(console, "\n") {
		if m := exitLine.FindStringSubmatch(line); m != nil {
			rep.Exit, _ = strconv.Atoi(m[1])
			continue
		}
		if m := runLine.FindStringSubmatch(line); m != nil {
			top, _, _ := strings.Cut(m[2], "/")
			if byName[top] == nil {
				byName[top] = &guestTest{Name: top}
				rep.Tests = append(rep.Tests, byName[top])
			}
			cur = byName[top]
			if m[1] == "RUN" && top != m[2] {
				cur.Output = append(cur.Output, line)
			}
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			top, _, _ := strings.Cut(m[3], "/")
			if gt := byName[top]; gt != nil {
				if m[1] == "" && top == m[3] {
					gt.Status, gt.Elapsed = m[2], m[4]
					cur = nil
				} else {
					gt.Output = append(gt.Output, line) // a subtest's result
				}
				continue
			}
		}
		if m := benchLine.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			rep.Benchmarks = append(rep.Benchmarks, guestBench{Name: m[1], N: n, Metrics: parseMetrics(m[3])})
			continue
		}
		if cur != nil {
			cur.Output = append(cur.Output, line)
		}
	}
	return rep
}

// parseMetrics reads "12.5 ns/op	3.0 apply-s" pairs.
func parseMetrics(s string) map[string]float64 {
	f := strings.Fields(s)
	out := map[string]float64{}
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			break
		}
		out[f[i+1]] = v
	}
	return out
}

func TestParseGuest(t *testing.T) {
	console := strings.Join([]string{
		"SWITCHYARD-GUEST-UP kernel=6.1.0 uptime=7.9s",
		"=== RUN   TestA",
		"    a_test.go:10: hello",
		"=== RUN   TestA/sub",
		"--- PASS: TestA (1.20s)",
		"    --- PASS: TestA/sub (0.50s)",
		"=== RUN   TestB",
		"=== PAUSE TestB",
		"=== RUN   TestC",
		"--- SKIP: TestC (0.00s)",
		"=== CONT  TestB",
		"    b_test.go:3: boom",
		"--- FAIL: TestB (2.00s)",
		"=== RUN   TestD",
		"BenchmarkApply/services=1000         \t       1\t3000000000 ns/op\t         3.100 apply-s",
		"FAIL",
		"SWITCHYARD-GUEST-EXIT 1 uptime=30.1s",
	}, "\n")
	got := parseGuest(console)
	want := guestReport{
		Exit: 1,
		Tests: []*guestTest{
			{Name: "TestA", Status: "PASS", Elapsed: "1.20s", Output: []string{
				"    a_test.go:10: hello", "=== RUN   TestA/sub", "    --- PASS: TestA/sub (0.50s)"}},
			{Name: "TestB", Status: "FAIL", Elapsed: "2.00s", Output: []string{"    b_test.go:3: boom"}},
			{Name: "TestC", Status: "SKIP", Elapsed: "0.00s"},
			{Name: "TestD", Output: []string{"FAIL"}},
		},
		Benchmarks: []guestBench{{Name: "BenchmarkApply/services=1000", N: 1,
			Metrics: map[string]float64{"ns/op": 3e9, "apply-s": 3.1}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseGuest (-want +got):\n%s", diff)
	}
}
