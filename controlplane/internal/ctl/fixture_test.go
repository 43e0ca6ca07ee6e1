package ctl_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/ctl"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/admin"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fleet is the fixture every command test reads:
//   - node-a: iptables agent, acknowledged a1, then given a2 (shop/db
//     moved to port 5433) which it refused (NACK);
//   - node-b: known, never connected, desired b;
//   - node-c: nftables agent, in sync at c.
//
// shop/web (10.96.0.10:80, port "http") has two endpoints on every node.
type fleet struct {
	a1, a2, b, c *cachetest.NodeView
	web, dbV2    *cache.View
}

const settingsHash = "0123456789abcdef"

func newFleet(t *testing.T) (*cache.Cache, fleet) {
	t.Helper()
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	c := cache.New(cache.WithClock(clocktesting.NewFakePassiveClock(now)))
	web := servertest.ServedService("shop", "web", "10.96.0.10", 80, "10.244.1.2", "10.244.2.2")
	f := fleet{web: cachetest.MustView(t, web), dbV2: cachetest.MustView(t, cachetest.Service("shop", "db", "10.96.0.20", 5433))}
	dbV1 := cachetest.MustView(t, cachetest.Service("shop", "db", "10.96.0.20", 5432))
	f.a1 = cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig("node-a", "zone-1")), f.web, dbV1)
	f.a2 = f.a1.With(f.dbV2)
	f.b = cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig("node-b", "zone-2")), f.web, f.dbV2)
	f.c = cachetest.NewNodeView(cachetest.MustView(t, cachetest.NodeConfig("node-c", "zone-3")), f.web)

	c.Publish("node-a", f.a1, nil)
	c.Publish("node-b", f.b, nil)
	c.Publish("node-c", f.c, nil)
	wa := c.Watch("node-a", &switchyardv1.Node{Name: "node-a", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES}, "delta")
	wa.Acked(f.a1, &switchyardv1.ApplyReport{
		ApplyDuration: durationpb.New(12 * time.Millisecond), ProgrammingLatency: durationpb.New(900 * time.Millisecond)})
	c.Publish("node-a", f.a2, []string{"shop/db"})
	wa.Nacked(&spb.Status{Code: int32(codes.InvalidArgument), Message: "bad port"})
	wc := c.Watch("node-c", &switchyardv1.Node{Name: "node-c", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}, "sotw")
	wc.Acked(f.c, &switchyardv1.ApplyReport{ApplyDuration: durationpb.New(3 * time.Millisecond)})
	return c, f
}

// apiUp is an API watch with every resource available.
type apiUp struct{}

func (apiUp) Snapshot() []apistatus.Status {
	return []apistatus.Status{{Resource: "endpointslices", State: apistatus.Available}, {Resource: "services", State: apistatus.Available}}
}
func (apiUp) Outage() time.Time { return time.Time{} }

type flagSettings struct{}

func (flagSettings) Status() settings.Status {
	return settings.Status{Hash: settingsHash, Source: "flags"}
}

// serveFleet serves AdminService over c on loopback and returns its
// address and a client of its own, to compare with what switchyardctl
// prints.
func serveFleet(t *testing.T, c *cache.Cache) (string, switchyardv1.AdminServiceClient) {
	t.Helper()
	return servertest.ServeAdmin(t, admin.New(c, apiUp{}, flagSettings{}))
}

// result is one switchyardctl run.
type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := ctl.Run(t.Context(), args, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// failure is a switchyardctl run that must fail.
type failure struct {
	name string
	args []string
	code int
	// stderr is a regular expression the one line must match.
	stderr string
}

// checkFailures runs each failure as a subtest: it exits with its code,
// prints nothing on stdout and one line on stderr that matches.
func checkFailures(t *testing.T, tests []failure) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.args...)
			if got.code != tt.code {
				t.Errorf("exit %d, want %d", got.code, tt.code)
			}
			if got.stdout != "" {
				t.Errorf("stdout %q, want nothing", got.stdout)
			}
			line, rest, _ := strings.Cut(got.stderr, "\n")
			if rest != "" || !strings.HasSuffix(got.stderr, "\n") {
				t.Errorf("stderr is not one line: %q", got.stderr)
			}
			if !regexp.MustCompile(tt.stderr).MatchString(line) {
				t.Errorf("stderr %q does not match %q", line, tt.stderr)
			}
		})
	}
}

// helpCase is a help request and what its stdout must contain.
type helpCase struct {
	args, want []string
}

// checkHelp runs each case as a subtest named by its arguments: it exits
// 0, prints nothing on stderr and each want on stdout. A want isFlag
// names must start a line as flag.PrintDefaults lists a flag.
func checkHelp(t *testing.T, tests []helpCase, isFlag func(w string) bool) {
	t.Helper()
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got := run(t, tt.args...)
			if got.code != 0 || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			for _, w := range tt.want {
				if isFlag(w) {
					w = "\n  -" + w + " " // as flag.PrintDefaults starts a flag's line
					if !strings.Contains(got.stdout, w) && !strings.Contains(got.stdout, strings.TrimSuffix(w, " ")+"\n") {
						t.Errorf("--help lacks flag %q:\n%s", strings.TrimSpace(w), got.stdout)
					}
					continue
				}
				if !strings.Contains(got.stdout, w) {
					t.Errorf("--help lacks %q:\n%s", w, got.stdout)
				}
			}
		})
	}
}

// fields splits text into lines of whitespace-separated fields, for
// comparing tables without restating tabwriter's padding.
func fields(s string) [][]string {
	var out [][]string
	for line := range strings.SplitSeq(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, strings.Fields(line))
	}
	return out
}

// label replaces each version in s by its name in names (version → name).
func label(s string, names map[string]string) string {
	for v, n := range names {
		s = strings.ReplaceAll(s, v, n)
	}
	return s
}

var column = regexp.MustCompile(`\S+(?: \S+)*`) // "IN SYNC" is one column

// checkAligned fails unless each of the rows rows of the table whose
// header is line header of s has a cell starting at each of the header's
// column offsets.
func checkAligned(t *testing.T, s string, header, rows int) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) < header+1+rows {
		t.Fatalf("no table of %d rows at line %d:\n%s", rows, header, s)
	}
	lines = lines[header : header+1+rows]
	for _, l := range lines[1:] {
		for _, loc := range column.FindAllStringIndex(lines[0], -1) {
			if at := loc[0]; at >= len(l) || l[at] == ' ' || (at > 0 && l[at-1] != ' ') {
				t.Errorf("row %q has no cell at column %d of header %q", l, at, lines[0])
			}
		}
	}
}
