package ipvs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

const (
	// scenariosEnv opts in to TestSystemScenariosInGuest (make
	// ipvs-scenarios): it takes far longer than the rest of `make test`.
	scenariosEnv = "SWITCHYARD_GUEST_SCENARIOS"
	// scenariosRowsEnv, when set, is a -test.run pattern for the rows.
	scenariosRowsEnv = "SWITCHYARD_GUEST_ROWS"
	// systemPkg is e2e/system, relative to the e2e module; scenariosTest
	// its test that runs the scenario table with the ipvs mode.
	systemPkg     = "./system"
	scenariosTest = "TestScenariosIPVS"
	// maxScenariosTime bounds the guest's run of the scenario table.
	maxScenariosTime = 60 * time.Minute
	// scenariosMem is the guest's memory (MiB) unless SWITCHYARD_QEMU_MEM
	// says otherwise: the initramfs holds ~450 MiB of binaries (etcd,
	// kube-apiserver, Switchyard's, the test) and is unpacked into RAM,
	// then etcd, kube-apiserver, a control plane, two agents and four
	// echo servers run from it.
	scenariosMem = "4096"
)

// Where the guest finds what the scenarios need (SWITCHYARD_QEMU_ADD).
const (
	guestTestbedDir = "/opt/testbed"    // etcd, kube-apiserver
	guestBinDir     = "/opt/switchyard" // switchyard-controlplane, switchyard-agent
)

// TestSystemScenariosInGuest runs e2e/system's scenario table with the
// ipvs mode (TestScenariosIPVS) inside the QEMU guest: API server, control
// plane, agents, namespaces and traffic all in the guest's kernel, which
// has IPVS. Every row is reported as a subtest: PASS, skip (a row that
// does not apply to the ipvs mode, with its reason) or FAIL with the
// guest's output. Opt-in (SWITCHYARD_GUEST_SCENARIOS=1, make
// ipvs-scenarios): under TCG it takes tens of minutes.
func TestSystemScenariosInGuest(t *testing.T) {
	if os.Getenv(scenariosEnv) == "" {
		t.Skipf("opt-in, tens of minutes under TCG: %s=1 (make ipvs-scenarios)", scenariosEnv)
	}
	res, rep, top := runSystemTest(t, scenariosTest, scenariosRowsEnv, maxScenariosTime)
	rows := parseRows(scenariosTest, top.Output)
	if len(rows) == 0 {
		t.Fatalf("%s ran no row (%s); its output:\n%s", scenariosTest, top.Status, strings.Join(top.Output, "\n"))
	}
	counts := reportRows(t, rows, rep.Exit)
	t.Logf("%s in the guest: %d rows passed, %d not applicable, %d failed, %d without a result; "+
		"the guest ran %v (%s)", scenariosTest, counts["PASS"], counts["SKIP"], counts["FAIL"], counts[""],
		res.Elapsed.Round(time.Second), top.Elapsed)
	if top.Status != "PASS" && counts["FAIL"]+counts[""] == 0 {
		t.Errorf("%s %s though no row failed; its output:\n%s", scenariosTest, top.Status, tail(strings.Join(top.Output, "\n"), 60))
	}
}

// runSystemTest runs e2e/system's test (its subtests matching the
// -test.run pattern in the environment variable rowsEnv, when set) in the
// guest (runSystemInGuest) and returns the run, its report and the
// test's own; it fails t when the guest did not run it.
func runSystemTest(t *testing.T, test, rowsEnv string, limit time.Duration, testbed ...string) (guestRun, guestReport, *guestTest) {
	t.Helper()
	run := "^" + test + "$"
	if rows := os.Getenv(rowsEnv); rows != "" {
		run += "/" + rows
	}
	res := runSystemInGuest(t, run, limit, testbed...)
	rep := parseGuest(res.Console)
	for _, gt := range rep.Tests {
		if gt.Name == test {
			return res, rep, gt
		}
	}
	t.Fatalf("the guest did not run %s (exit %d); console (last 80 lines):\n%s", test, rep.Exit, tail(res.Console, 80))
	return res, rep, nil
}

// runSystemInGuest boots the guest with e2e/system's test binary, the
// test bed's binaries named by testbed (etcd and kube-apiserver, and
// whatever else the tests need) and Switchyard's commands, and runs the
// tests matching run there, within limit.
func runSystemInGuest(t *testing.T, run string, limit time.Duration, testbed ...string) guestRun {
	t.Helper()
	root := requireGuestHost(t)
	if err := apiserver.Available(); err != nil {
		skipOrFail(t, "e2e/system needs etcd and kube-apiserver (make testbed): %v", err)
	}
	add := guestFiles(t, append([]string{"etcd", "kube-apiserver"}, testbed...))
	bin := buildGuest(t, root, systemPkg)
	budget := guestBudget(t, limit)
	env := []string{
		"SWITCHYARD_QEMU_ADD=" + add,
		"SWITCHYARD_QEMU_ENV=" + apiserver.EnvBinDir + "=" + guestTestbedDir + "\n" +
			"SWITCHYARD_PREBUILT_BIN=" + guestBinDir,
	}
	if os.Getenv("SWITCHYARD_QEMU_MEM") == "" {
		env = append(env, "SWITCHYARD_QEMU_MEM="+scenariosMem)
	}
	args := []string{"-test.v", "-test.count=1", "-test.run=" + run,
		"-test.timeout=" + (budget - guestTimeoutSlack).String()}
	return runGuest(t, root, bin, budget, env, args...)
}

// guestFiles lays out what the guest's root gets besides the test binary:
// the test bed's binaries named (symlinks to its cache, which the script
// follows) and Switchyard's commands, built here.
func guestFiles(t *testing.T, testbedBins []string) string {
	t.Helper()
	add := t.TempDir()
	testbed, err := apiserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(add, guestTestbedDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range testbedBins {
		if err := os.Symlink(filepath.Join(testbed, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if _, err := launch.BuildSwitchyard(t.Context(), filepath.Join(add, guestBinDir), nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("built Switchyard's commands in %v", time.Since(start).Round(time.Millisecond))
	return add
}

// reportRows reports each row as a subtest with the guest's output, and
// counts them by status ("" for a row without a result: the guest
// stopped, exit exit, during it).
func reportRows(t *testing.T, rows []*guestRow, exit int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, r := range rows {
		counts[r.Status]++
		t.Run(r.Name, func(t *testing.T) {
			t.Log("guest output:\n" + strings.Join(r.Output, "\n"))
			switch r.Status {
			case "PASS":
			case "SKIP":
				t.Skip(r.Reason)
			case "FAIL":
				t.Errorf("failed inside the guest after %s", r.Elapsed)
			default:
				t.Errorf("no result: the guest stopped during this row (exit %d)", exit)
			}
		})
	}
	return counts
}

// guestRow is one row of the scenario table: a direct subtest of the
// guest's top-level test.
type guestRow struct {
	Name, Status, Elapsed string
	// Reason is a skipped row's last log line (notApplicable's message).
	Reason string
	Output []string
}

// parseRows splits a top-level test's output (guestTest.Output) into its
// direct subtests. A row's lines run from its "=== RUN   top/Row" line to
// the next row's, or to a "=== NAME  top" line (the parent speaking
// again); lines of deeper subtests belong to their row. go test -v prints
// the rows' "--- STATUS: top/Row" lines where each ends, or all together
// after the parent's own result line: they are matched by name wherever
// they are.
func parseRows(top string, output []string) []*guestRow {
	var rows []*guestRow
	byName := map[string]*guestRow{}
	var cur *guestRow
	for _, line := range output {
		if m := resultLine.FindStringSubmatch(line); m != nil {
			if r := byName[strings.TrimPrefix(m[3], top+"/")]; r != nil {
				r.Status, r.Elapsed = m[2], m[4]
				if r == cur {
					cur = nil
				}
				continue
			}
		}
		if m := runLine.FindStringSubmatch(line); m != nil {
			name, sub := strings.CutPrefix(m[2], top+"/")
			switch {
			case !sub:
				cur = nil // the parent, or another test
				continue
			case m[1] == "RUN" && !strings.Contains(name, "/"):
				cur = &guestRow{Name: name}
				byName[name] = cur
				rows = append(rows, cur)
				continue
			}
		}
		if cur != nil {
			cur.Output = append(cur.Output, line)
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "---") && !strings.HasPrefix(t, "===") {
				cur.Reason = t
			}
		}
	}
	return rows
}

func TestParseRows(t *testing.T) {
	// As parseGuest leaves them: the rows' results after the parent's.
	out := []string{
		"=== RUN   TestS/A",
		"    x_test.go:1: a",
		"=== RUN   TestS/B",
		"=== RUN   TestS/B/case",
		"    drift_test.go:40: not applicable: no drift check",
		"=== RUN   TestS/C",
		"    c_test.go:9: boom",
		"=== NAME  TestS",
		"    system_test.go:95: control plane 0 logs:",
		"    --- PASS: TestS/A (1.00s)",
		"    --- SKIP: TestS/B (0.20s)",
		"        --- PASS: TestS/B/case (0.10s)",
	}
	got := parseRows("TestS", out)
	var sum []string
	for _, r := range got {
		sum = append(sum, fmt.Sprintf("%s %s %s %q %d", r.Name, r.Status, r.Elapsed, r.Reason, len(r.Output)))
	}
	want := []string{
		`A PASS 1.00s "x_test.go:1: a" 1`,
		`B SKIP 0.20s "drift_test.go:40: not applicable: no drift check" 2`,
		`C   "c_test.go:9: boom" 1`,
	}
	if strings.Join(sum, "\n") != strings.Join(want, "\n") {
		t.Errorf("parseRows:\n got %q\nwant %q", sum, want)
	}
}
