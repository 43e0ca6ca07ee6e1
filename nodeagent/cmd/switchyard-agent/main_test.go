package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDryRunAgent runs the command in dry-run mode against a scripted
// control plane: it prints what it would program, ACKs, and on shutdown
// (SIGTERM is a canceled context) returns cleanly.
func TestDryRunAgent(t *testing.T) {
	cp := cptest.New(t)
	var stdout, stderr runtest.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--mode", "dry-run", "--insecure", "--control-plane", cp.Addr(), "--node-name", "node-a",
			"--state-dir", t.TempDir(), "--healthz-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
			"--min-sync-period", "0s"}, &stdout, &stderr)
	}()
	first := cp.Next()
	if first.GetNode().GetName() != "node-a" || first.GetNode().GetMode() != switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN {
		t.Fatalf("first request = %v", first)
	}
	cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s1", Nonce: "n1", Resources: []*switchyardv1.Resource{{
		Name: "ns/web", Version: "1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.1"}}},
	}}})
	if r := cp.Next(); r.GetAppliedVersion() != "s1" {
		t.Fatalf("ACK = %v", r)
	}
	if !strings.Contains(stdout.String(), "service ns/web type=UNSPECIFIED clusterIPs=10.96.0.1") {
		t.Errorf("dry-run output lacks the service:\n%s", stdout.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v\n%s", err, stderr.String())
		}
	case <-time.After(cptest.Timeout):
		t.Fatal("run did not return after shutdown")
	}
	if strings.Contains(stdout.String(), "cleanup") {
		t.Errorf("shutdown cleaned up the dataplane:\n%s", stdout.String())
	}
}
