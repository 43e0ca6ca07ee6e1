package ctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestTables runs each command's table output against the fleet and
// compares it field by field, versions named (A1 is node-a's first view).
func TestTables(t *testing.T) {
	c, f := newFleet(t)
	addr, _ := serveFleet(t, c)
	names := map[string]string{
		f.a1.Version(): "A1", f.a2.Version(): "A2", f.b.Version(): "B", f.c.Version(): "C",
		f.web.Version: "WEB", f.dbV2.Version: "DB2",
	}
	unseen := "not compared: the NodeConfig and services removed from the desired view (AdminService has no RPC for the acknowledged view's content)"
	tests := []struct {
		name string
		args []string
		code int
		want string
		// table is the line of a table's header and its number of rows,
		// checked for alignment.
		table [2]int
	}{{
		name: "status", args: []string{"status"}, table: [2]int{1, 3},
		want: `api: available  settings: 0123456789abcdef (flags)
NODE    CONNECTED  MODE      DESIRED  ACKED  IN SYNC  LAST APPLY  LATENCY  NACK
node-a  yes        iptables  A2       A1     no       12ms        900ms    InvalidArgument: bad port
node-b  no         -         B        -      no       -           -        -
node-c  yes        nftables  C        C      yes      3ms         -        -`,
	}, {
		name: "explain the acknowledged view", args: []string{"explain", "node-a", "tcp", "10.244.9.9", "10.96.0.10:80"}, table: [2]int{1, 2},
		want: `forward to [10.244.1.2:8080 50.0%, 10.244.2.2:8080 50.0%] by shop/web:http cluster IP (endpoints)
ENDPOINT         SHARE
10.244.1.2:8080  50.0%
10.244.2.2:8080  50.0%
masquerade:  no
reason:      endpoints
version:     A1
mode:        iptables
applied:     yes`,
	}, {
		name: "explain the desired view in another mode, flags after the arguments",
		args: []string{"explain", "node-a", "TCP", "10.244.9.9", "10.96.0.20:5433", "--desired", "--mode", "nftables"},
		want: `reject by shop/db cluster IP (no-endpoints)
masquerade:  no
reason:      no-endpoints
note:        this is the desired view: the node has not acknowledged it yet
version:     A2
mode:        nftables
applied:     no`,
	}, {
		name: "explain IPv6", args: []string{"explain", "node-c", "udp", "fd00::5", "[fd00::10]:53"},
		want: `pass (not-a-service)
masquerade:  no
reason:      not-a-service
version:     C
mode:        nftables
applied:     yes`,
	}, {
		name: "view", args: []string{"view", "node-a"}, table: [2]int{1, 3},
		want: `node node-a: view A2, 3 resources
NAME      KIND        TYPE       CLUSTER IPS  EXTERNAL IPS  PORTS        ENDPOINTS  LOCAL
node-a    NodeConfig  -          -            -             -            -          -
shop/db   Service     ClusterIP  10.96.0.20   -             5433/TCP     0          0
shop/web  Service     ClusterIP  10.96.0.10   -             http:80/TCP  2          0`,
	}, {
		name: "diff: a refused update", args: []string{"diff", "node-a"}, code: 1, table: [2]int{2, 1},
		want: `node node-a: desired A2, acknowledged A1
1 service(s) not acknowledged at their desired version:
SERVICE  DESIRED
shop/db  DB2
` + unseen,
	}, {
		name: "diff: never connected", args: []string{"diff", "node-b"}, code: 1, table: [2]int{2, 2},
		want: `node node-b: desired B, acknowledged nothing
2 service(s) not acknowledged at their desired version:
SERVICE   DESIRED
shop/db   DB2
shop/web  WEB
` + unseen,
	}, {
		name: "diff: in sync", args: []string{"diff", "node-c"},
		want: "node node-c: in sync at C",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, append([]string{"--server", addr, "--insecure"}, tt.args...)...)
			if got.code != tt.code || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q; want exit %d and no stderr", got.code, got.stderr, tt.code)
			}
			out := label(got.stdout, names)
			if d := cmp.Diff(fields(tt.want), fields(out)); d != "" {
				t.Errorf("output (-want +got):\n%s\ngot:\n%s", d, out)
			}
			if tt.table[1] > 0 {
				checkAligned(t, got.stdout, tt.table[0], tt.table[1])
			}
		})
	}
}

// TestJSONIsTheResponse: -o json prints the RPC's response, all of it, as
// protojson with grpcurl's two-space indent.
func TestJSONIsTheResponse(t *testing.T) {
	c, _ := newFleet(t)
	addr, client := serveFleet(t, c)
	tests := []struct {
		name string
		args []string
		call func(ctx context.Context) (proto.Message, error)
	}{{
		name: "status", args: []string{"status"},
		call: func(ctx context.Context) (proto.Message, error) {
			return client.ListNodes(ctx, &switchyardv1.ListNodesRequest{})
		},
	}, {
		name: "explain", args: []string{"explain", "node-a", "tcp", "10.244.9.9", "10.96.0.10:80", "--desired"},
		call: func(ctx context.Context) (proto.Message, error) {
			return client.Explain(ctx, &switchyardv1.ExplainRequest{NodeName: "node-a", Protocol: "tcp",
				SourceIp: "10.244.9.9", DestinationIp: "10.96.0.10", DestinationPort: 80, Desired: true})
		},
	}, {
		name: "view", args: []string{"view", "node-b"},
		call: func(ctx context.Context) (proto.Message, error) {
			return client.GetNodeView(ctx, &switchyardv1.GetNodeViewRequest{NodeName: "node-b"})
		},
	}}
	for _, tt := range tests {
		for _, o := range [][]string{{"-o", "json"}, {"--output=json"}} {
			t.Run(tt.name+" "+strings.Join(o, " "), func(t *testing.T) {
				want, err := tt.call(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				got := run(t, append(append([]string{"--server", addr, "--insecure"}, tt.args...), o...)...)
				if got.code != 0 || got.stderr != "" {
					t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
				}
				if !strings.HasPrefix(got.stdout, "{\n  \"") || !strings.HasSuffix(got.stdout, "\n}\n") {
					t.Errorf("not multiline JSON indented by two spaces:\n%s", got.stdout)
				}
				decoded := want.ProtoReflect().New().Interface()
				if err := protojson.Unmarshal([]byte(got.stdout), decoded); err != nil {
					t.Fatalf("not protojson of %T: %v", want, err)
				}
				if d := cmp.Diff(want, decoded, protocmp.Transform()); d != "" {
					t.Errorf("printed response (-RPC +printed):\n%s", d)
				}
			})
		}
	}
}

func TestDiffJSON(t *testing.T) {
	c, f := newFleet(t)
	addr, _ := serveFleet(t, c)
	tests := []struct {
		node string
		code int
		want map[string]any
	}{{
		node: "node-a", code: 1,
		want: map[string]any{"node": "node-a", "desiredVersion": f.a2.Version(), "ackedVersion": f.a1.Version(), "inSync": false,
			"servicesNotAcked": []any{map[string]any{"name": "shop/db", "desiredVersion": f.dbV2.Version}},
			"notCompared":      "not compared: the NodeConfig and services removed from the desired view (AdminService has no RPC for the acknowledged view's content)"},
	}, {
		node: "node-c",
		want: map[string]any{"node": "node-c", "desiredVersion": f.c.Version(), "ackedVersion": f.c.Version(), "inSync": true,
			"servicesNotAcked": []any{}},
	}}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			got := run(t, "--server", addr, "--insecure", "-o", "json", "diff", tt.node)
			if got.code != tt.code || got.stderr != "" {
				t.Fatalf("exit %d, stderr %q; want exit %d", got.code, got.stderr, tt.code)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(got.stdout), &m); err != nil {
				t.Fatalf("%v\n%s", err, got.stdout)
			}
			if d := cmp.Diff(tt.want, m); d != "" {
				t.Errorf("diff -o json (-want +got):\n%s", d)
			}
		})
	}
}

// TestStatusNodeWithoutNodeObject: an agent connected for a node the
// control plane has no Node object for shows NO NODE in its row and is
// named under the table, so the node's silence is not mistaken for sync.
func TestStatusNodeWithoutNodeObject(t *testing.T) {
	c, _ := newFleet(t)
	c.Watch("node-x", &switchyardv1.Node{Name: "node-x", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES}, "delta")
	addr, _ := serveFleet(t, c)
	got := run(t, "--server", addr, "--insecure", "status")
	if got.code != 0 || got.stderr != "" {
		t.Fatalf("exit %d, stderr %q", got.code, got.stderr)
	}
	lines := fields(got.stdout)
	row := lines[len(lines)-2]
	if d := cmp.Diff([]string{"node-x", "yes", "nftables", "-", "-", "NO", "NODE", "-", "-", "-"}, row); d != "" {
		t.Errorf("node-x row (-want +got):\n%s\n%s", d, got.stdout)
	}
	footer := "no Node object: node-x (agent connected; it keeps its last applied rules and receives no change until the Node exists)"
	if last := strings.TrimSpace(got.stdout[strings.LastIndex(strings.TrimRight(got.stdout, "\n"), "\n")+1:]); last != footer {
		t.Errorf("last line %q, want %q", last, footer)
	}
}
