package controlplane_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/internal/checkout"
)

func grpcurl(ctx context.Context, t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestGrpcurl runs the README's grpcurl commands against the real control
// plane: reflection lists and describes the services, ListNodes answers,
// and StreamSnapshots returns one node's whole view to a one-shot client.
func TestGrpcurl(t *testing.T) {
	bin := checkout.Grpcurl(t)
	ctx, api, _ := withFixture(t)
	cp := startControlPlane(t, api)

	list := grpcurl(ctx, t, bin, "-plaintext", cp.grpc, "list")
	for _, svc := range []string{"switchyard.v1.AdminService", "switchyard.v1.DiscoveryService", "grpc.health.v1.Health"} {
		if !strings.Contains(list, svc) {
			t.Errorf("grpcurl list lacks %s:\n%s", svc, list)
		}
	}
	desc := grpcurl(ctx, t, bin, "-plaintext", cp.grpc, "describe", "switchyard.v1.AdminService")
	for _, rpc := range []string{"rpc ListNodes", "rpc GetNodeView", "rpc GetService"} {
		if !strings.Contains(desc, rpc) {
			t.Errorf("describe lacks %q:\n%s", rpc, desc)
		}
	}

	var nodes struct {
		Nodes []struct {
			Name           string `json:"name"`
			DesiredVersion string `json:"desiredVersion"`
		} `json:"nodes"`
	}
	out := grpcurl(ctx, t, bin, "-plaintext", cp.grpc, "switchyard.v1.AdminService/ListNodes")
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		t.Fatalf("ListNodes output is not JSON: %v\n%s", err, out)
	}
	if len(nodes.Nodes) != 2 || nodes.Nodes[0].Name != "node-a" || nodes.Nodes[0].DesiredVersion == "" {
		t.Errorf("ListNodes = %s", out)
	}

	snap := grpcurl(ctx, t, bin, "-plaintext", "-d", `{"node":{"name":"node-a"}}`, cp.grpc,
		"switchyard.v1.DiscoveryService/StreamSnapshots")
	var resp struct {
		VersionInfo string `json:"versionInfo"`
		Resources   []struct {
			Name    string          `json:"name"`
			Service json.RawMessage `json:"service"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(snap), &resp); err != nil {
		t.Fatalf("StreamSnapshots output is not one JSON response: %v\n%s", err, snap)
	}
	var got []string
	for _, r := range resp.Resources {
		got = append(got, r.Name)
	}
	if resp.VersionInfo == "" || strings.Join(got, ",") != "default/kubernetes,node-a,web/front" {
		t.Errorf("StreamSnapshots version %q resources %v\n%s", resp.VersionInfo, got, snap)
	}
	if !strings.Contains(snap, `"10.244.0.5"`) {
		t.Errorf("StreamSnapshots lacks the endpoint 10.244.0.5:\n%s", snap)
	}
}
