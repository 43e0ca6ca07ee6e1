package ipvs

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// guestTimeoutSlack is how much earlier than the watchdog the guest's test
// binary panics on its own -test.timeout, so a hung test still prints its
// goroutines and a verdict.
const guestTimeoutSlack = 30 * time.Second

// fullBenchBudget is the guest time the benchmarks get before the 5,000
// services case is left out (it takes minutes under TCG).
const fullBenchBudget = 15 * time.Minute

// TestIPVSInGuest boots the guest, runs every guest test there and reports
// each as a subtest: PASS, FAIL with the guest's output, or (a guest test
// that skipped) skip, which fails in CI like every skip of a kernel test.
func TestIPVSInGuest(t *testing.T) {
	root := requireGuestHost(t)
	bin := buildGuest(t, root, guestPkg)
	budget := guestBudget(t, maxGuestTime)
	args := []string{"-test.v", "-test.count=1", "-test.timeout=" + (budget - guestTimeoutSlack).String()}
	if re := os.Getenv("SWITCHYARD_GUEST_RUN"); re != "" {
		args = append(args, "-test.run="+re)
	}
	run := runGuest(t, root, bin, budget, nil, args...)
	rep := parseGuest(run.Console)
	if len(rep.Tests) == 0 {
		t.Fatalf("the guest ran no test (exit %d); console (last 60 lines):\n%s", rep.Exit, tail(run.Console, 60))
	}
	failed := false
	for _, gt := range rep.Tests {
		ok := t.Run(gt.Name, func(t *testing.T) {
			t.Log("guest output:\n" + strings.Join(gt.Output, "\n"))
			switch gt.Status {
			case "PASS":
			case "SKIP":
				skipOrFail(t, "skipped inside the guest")
			case "FAIL":
				t.Errorf("failed inside the guest after %s", gt.Elapsed)
			default:
				t.Errorf("no result: the guest stopped during this test (exit %d); console (last 40 lines):\n%s",
					rep.Exit, tail(run.Console, 40))
			}
		})
		failed = failed || !ok
	}
	if rep.Exit != 0 && !failed {
		t.Errorf("guest test binary exited %d though every test passed; console (last 40 lines):\n%s",
			rep.Exit, tail(run.Console, 40))
	}
}

// BenchmarkIPVSInGuest boots the guest once and runs its benchmarks
// (services × 5 endpoints: first apply, a one-endpoint change, a full
// resync, cleanup). Each guest result is reported as metrics of this
// benchmark, named after the guest benchmark; the guest's own lines are
// logged. SWITCHYARD_GUEST_BENCH selects guest benchmarks (a -test.bench
// pattern, default all).
func BenchmarkIPVSInGuest(b *testing.B) {
	root := requireGuestHost(b)
	bin := buildGuest(b, root, guestPkg)
	budget := guestBudget(b, maxGuestTime)
	pattern := "."
	switch p := os.Getenv("SWITCHYARD_GUEST_BENCH"); {
	case p != "":
		pattern = p
	case budget < fullBenchBudget:
		pattern = "Apply/services=1000$"
		b.Logf("%v left before the deadline: 1,000 services only (run with -timeout 40m for 5,000)", budget)
	}
	var rep guestReport
	for b.Loop() { // one boot: it takes far longer than -benchtime
		run := runGuest(b, root, bin, budget, nil, "-test.run=^$", "-test.bench="+pattern, "-test.v",
			"-test.timeout="+(budget-guestTimeoutSlack).String())
		rep = parseGuest(run.Console)
		if rep.Exit != 0 || len(rep.Benchmarks) == 0 {
			b.Fatalf("guest benchmarks failed (exit %d, %d results); console (last 60 lines):\n%s",
				rep.Exit, len(rep.Benchmarks), tail(run.Console, 60))
		}
	}
	for _, gb := range rep.Benchmarks {
		name := strings.TrimPrefix(gb.Name, "Benchmark")
		// Drop the -GOMAXPROCS suffix the guest appended.
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		units := slices.Sorted(maps.Keys(gb.Metrics))
		var line []string
		for _, u := range units {
			v := gb.Metrics[u]
			if u == "ns/op" { // the host's own ns/op is the whole boot
				v, u = v/1e9, "s/op"
			}
			b.ReportMetric(v, name+":"+u)
			line = append(line, fmt.Sprintf("%.3g %s", v, u))
		}
		b.Logf("guest %s (N=%d): %s", name, gb.N, strings.Join(line, ", "))
	}
}
