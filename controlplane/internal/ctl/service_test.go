package ctl_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// serviceFleet serves a fleet of three nodes with shop/web and shop/db,
// each node's agent connected and in sync, with the fleet latency tracker
// wired as the daemon wires it. Then shop/web changes (WEB1 to WEB2):
// node-a acknowledges it 310ms later, node-b 1.2s later, node-c not yet.
// It returns the server's address, a client and the versions' names.
func serviceFleet(t *testing.T) (string, switchyardv1.AdminServiceClient, map[string]string) {
	t.Helper()
	f := servertest.NewFleet(t, "shop", apiUp{}, flagSettings{})
	web2 := cachetest.MustView(t, cachetest.Service("shop", "web", "10.96.0.10", 8080))
	f.Change(web2)
	for node, after := range map[string]time.Duration{"node-a": 310 * time.Millisecond, "node-b": 1200 * time.Millisecond} {
		f.Ack(node, after)
	}
	names := map[string]string{f.Web.Version: "WEB1", web2.Version: "WEB2", f.DB.Version: "DB"}
	return f.Addr, f.Client, names
}

func TestService(t *testing.T) {
	addr, _, names := serviceFleet(t)
	tests := []struct {
		name string
		args []string
		want string
	}{{
		name: "changed: applied on two of three, with latency", args: []string{"service", "shop/web"},
		want: `service shop/web: live on 2 of 3 nodes (p50 330ms, p99 1.2s)
NODE    DESIRED  ACKED
node-a  WEB2     yes
node-b  WEB2     yes
node-c  WEB2     no`,
	}, {
		name: "unchanged since the replica started: no latency", args: []string{"service", "shop/db"},
		want: `service shop/db: live on 3 of 3 nodes
NODE    DESIRED  ACKED
node-a  DB       yes
node-b  DB       yes
node-c  DB       yes`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, append([]string{"--server", addr, "--insecure"}, tt.args...)...)
			if got.code != 0 || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q; want exit 0 and no stderr", got.code, got.stderr)
			}
			out := label(got.stdout, names)
			if d := cmp.Diff(fields(tt.want), fields(out)); d != "" {
				t.Errorf("output (-want +got):\n%s\ngot:\n%s", d, out)
			}
			checkAligned(t, got.stdout, 1, 3)
		})
	}
}

// TestServiceJSON: -o json prints GetService's response, all of it.
func TestServiceJSON(t *testing.T) {
	addr, client, _ := serviceFleet(t)
	want, err := client.GetService(t.Context(), &switchyardv1.GetServiceRequest{Namespace: "shop", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if want.GetLatencySamples() != 2 || want.GetAppliedNodes() != 2 || want.GetTotalNodes() != 3 {
		t.Fatalf("fixture: GetService = %v, want 2 samples, 2 of 3 applied", want)
	}
	for _, args := range [][]string{{"service", "shop/web", "-o", "json"}, {"--output=json", "service", "shop/web"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			got := run(t, append([]string{"--server", addr, "--insecure"}, args...)...)
			if got.code != 0 || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
			}
			if !strings.HasPrefix(got.stdout, "{\n  \"") || !strings.HasSuffix(got.stdout, "\n}\n") {
				t.Errorf("not multiline JSON indented by two spaces:\n%s", got.stdout)
			}
			decoded := &switchyardv1.GetServiceResponse{}
			if err := protojson.Unmarshal([]byte(got.stdout), decoded); err != nil {
				t.Fatalf("not protojson of GetServiceResponse: %v", err)
			}
			if d := cmp.Diff(want, decoded, protocmp.Transform()); d != "" {
				t.Errorf("printed response (-RPC +printed):\n%s", d)
			}
		})
	}
}

func TestServiceErrors(t *testing.T) {
	addr, _, _ := serviceFleet(t)
	plain := []string{"--server", addr, "--insecure", "service"}
	tests := []failure{
		{"missing argument", nil, 2, `^switchyardctl service: want NAMESPACE/NAME, got 0 argument\(s\)`},
		{"no namespace", []string{"web"}, 2, `^switchyardctl service: NAMESPACE/NAME "web": want a namespace and a name, as shop/web \(see switchyardctl service --help\)$`},
		{"empty name", []string{"shop/"}, 2, `NAMESPACE/NAME "shop/"`},
		{"empty namespace", []string{"/web"}, 2, `NAMESPACE/NAME "/web"`},
		{"two slashes", []string{"shop/web/x"}, 2, `NAMESPACE/NAME "shop/web/x"`},
		{"on no node", []string{"shop/nope"}, 1, `^switchyardctl service: GetService: NotFound: service "shop/nope" is on no node$`},
	}
	for i := range tests {
		tests[i].args = append(slices.Clone(plain), tests[i].args...)
	}
	checkFailures(t, tests)
}

// TestServiceHelp: the command is listed, and its --help names its
// argument, what it prints and every global flag.
func TestServiceHelp(t *testing.T) {
	tests := []helpCase{
		{[]string{"--help"}, []string{"\n  service NAMESPACE/NAME ", "GetService"}},
		{[]string{"service", "--help"}, []string{"service [flags] NAMESPACE/NAME", "p50 and p99", "\n  -o ", "\n  -timeout ", "\n  -server "}},
		{[]string{"help", "service"}, []string{"service [flags] NAMESPACE/NAME"}},
	}
	checkHelp(t, tests, func(string) bool { return false })
}
