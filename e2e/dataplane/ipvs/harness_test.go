package ipvs

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const (
	// guestPkg is the package built into the guest's test binary, relative
	// to the e2e module.
	guestPkg = "./dataplane/ipvs/guest"
	// script boots the guest, relative to the repository root.
	script = "hack/qemu-kernel.sh"
	// maxGuestTime bounds one guest run of the guest package (watchdog)
	// however long the test binary's own deadline is.
	maxGuestTime = 20 * time.Minute
	// hostMargin is what the host keeps for itself after the guest's
	// watchdog: the script kills qemu 60 s after it, plus reporting.
	hostMargin = 90 * time.Second
)

// Exit codes of hack/qemu-kernel.sh run.
const (
	exitPass    = 0
	exitFail    = 1
	exitHarness = 2
	exitPrereq  = 3
)

// skipOrFail skips the test with msg, or fails it when CI is set, so that a
// CI machine without the guest cannot pass by skipping.
func skipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if ci := os.Getenv("CI"); ci != "" {
		tb.Fatalf("%s (CI=%q is set: refusing to skip)", msg, ci)
	}
	tb.Skip(msg)
}

// requireGuestHost checks what booting the guest needs on this machine and
// returns the repository root.
func requireGuestHost(tb testing.TB) string {
	tb.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		skipOrFail(tb, "the IPVS guest needs linux/amd64, this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if os.Getenv("SWITCHYARD_QEMU_SKIP") != "" && os.Getenv("CI") == "" {
		tb.Skip("SWITCHYARD_QEMU_SKIP is set")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		skipOrFail(tb, "the IPVS kernel tests boot a QEMU guest and qemu-system-x86_64 is not installed "+
			"(as root: apt-get install --no-install-recommends qemu-system-x86)")
	}
	if _, err := exec.LookPath("go"); err != nil {
		skipOrFail(tb, "the go command is not in PATH: it builds the guest's test binary")
	}
	return repoRoot(tb)
}

// repoRoot walks up from the working directory (the package directory
// under go test) to the directory holding go.work and the script.
func repoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			if _, err := os.Stat(filepath.Join(d, script)); err != nil {
				tb.Fatalf("%s has go.work but no %s: %v", d, script, err)
			}
			return d
		}
		if filepath.Dir(d) == d {
			tb.Fatalf("no go.work above %s", dir)
		}
	}
}

// buildGuest compiles pkg (relative to the e2e module: guestPkg, or
// e2e/system's) into a static test binary. The flags match the Makefile's
// binaries (CGO_ENABLED=0 -trimpath) so the build cache is shared.
func buildGuest(tb testing.TB, root, pkg string) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "guest.test")
	start := time.Now()
	cmd := exec.CommandContext(tb.Context(), "go", "test", "-c", "-trimpath", "-o", out, pkg)
	cmd.Dir = filepath.Join(root, "e2e")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build the guest test binary (%s): %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	tb.Logf("built %s in %v", pkg, time.Since(start).Round(time.Millisecond))
	return out
}

// guestRun is one boot of the guest.
type guestRun struct {
	Console string // the serial console, \r removed
	Log     string // the script's own messages (stderr)
	Exit    int    // the script's exit code
	Elapsed time.Duration
}

// guestBudget returns the guest's watchdog: what remains of the test
// binary's deadline minus hostMargin, at most limit.
func guestBudget(tb testing.TB, limit time.Duration) time.Duration {
	tb.Helper()
	budget := limit
	if dl, ok := deadline(tb); ok {
		budget = min(budget, time.Until(dl)-hostMargin)
	}
	if budget < 2*time.Minute {
		tb.Fatalf("only %v left before the test deadline: run with a longer -timeout (e.g. -timeout 20m)", budget)
	}
	return budget.Truncate(time.Second)
}

// binaryStart approximates when this test binary started, for the
// deadline of benchmarks (testing.B has no Deadline).
var binaryStart = time.Now()

// deadline is the test's deadline, or for a benchmark the binary's
// -test.timeout counted from its start.
func deadline(tb testing.TB) (time.Time, bool) {
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		return t.Deadline()
	}
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 0 {
			return binaryStart.Add(d), true
		}
	}
	return time.Time{}, false
}

// runGuest boots the guest with bin as its test and args as its arguments;
// env is added to the script's environment (SWITCHYARD_QEMU_*). It skips
// (or fails in CI) when prerequisites are missing and fails the test when
// the guest gave no verdict; otherwise the caller reads the verdict from
// the console.
func runGuest(tb testing.TB, root, bin string, budget time.Duration, env []string, args ...string) guestRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), budget+hostMargin)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, script), append([]string{"run", bin}, args...)...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), env...), fmt.Sprintf("SWITCHYARD_QEMU_TIMEOUT=%d", int(budget.Seconds())))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	run := guestRun{Console: strings.ReplaceAll(stdout.String(), "\r", ""), Log: stderr.String(),
		Elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		run.Exit = ee.ExitCode()
	default:
		tb.Fatalf("run %s: %v\n%s", script, err, run.Log)
	}
	tb.Logf("guest run: exit %d after %v\n%s", run.Exit, run.Elapsed.Round(time.Millisecond), strings.TrimSpace(run.Log))
	switch run.Exit {
	case exitPass, exitFail:
		return run
	case exitPrereq:
		skipOrFail(tb, "cannot boot the IPVS guest: %s", lastLine(run.Log))
	default:
		tb.Fatalf("the guest gave no verdict (%s exit %d): %s\nconsole (last 60 lines):\n%s",
			script, run.Exit, lastLine(run.Log), tail(run.Console, 60))
	}
	return run
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
