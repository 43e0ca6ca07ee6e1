package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// rejections returns switchyard_agent_state_file_rejections_total by
// reason.
func (n *node) rejections() map[string]float64 {
	n.t.Helper()
	return n.samples("switchyard_agent_state_file_rejections_total")
}

// TestRestartRejectsUntrustedStateFile: an empty file and another node's
// valid one are rejected, logged and counted; nothing is applied before
// the control plane answers, the agent announces no versions, and its
// first sync is the control plane's whole view.
func TestRestartRejectsUntrustedStateFile(t *testing.T) {
	tests := []struct {
		name   string
		write  func(t *testing.T, path string)
		reason string
	}{
		{"empty", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, persist.ReasonEmpty},
		{"another node's", func(t *testing.T, path string) {
			other, err := persist.New(t.TempDir(), "node-b")
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Save(&view.View{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{"ns/x": svc("ns/x", "9")}}, nil); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(other.Path())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, persist.ReasonNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.write(t, filepath.Join(dir, persist.FileName))
			cp := cptest.New(t)
			var log runtest.Buffer
			n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, log: &log})
			first := cp.Next()
			if got := first.GetInitialResourceVersions(); len(got) != 0 {
				t.Errorf("initial_resource_versions = %v, want none", got)
			}
			push(cp, "s1", "n1", nil, svc("ns/a", "1"))
			expectAck(t, cp, "n1", "s1")
			calls := n.dp.Calls()
			if len(calls) != 1 || calls[0].Op != "apply" || !calls[0].Opts.Full {
				t.Errorf("calls = %+v, want one full apply: the control plane's view, nothing before it", calls)
			}
			if diff := cmp.Diff([]string{"ns/a"}, n.dp.Services()); diff != "" {
				t.Errorf("dataplane (-want +got):\n%s", diff)
			}
			if got := n.rejections(); got[tt.reason] != 1 {
				t.Errorf("rejections = %v, want %s: 1", got, tt.reason)
			}
			if !strings.Contains(log.String(), "state file rejected") || !strings.Contains(log.String(), "reason="+tt.reason) {
				t.Errorf("log lacks the rejection:\n%s", log.String())
			}
		})
	}
}

// TestRestartAfterCrashBetweenCommitAndSave: the pending record of a
// batch whose commit may have happened is restored on top of the saved
// view, adding and updating, removing nothing; the control plane's first
// response removes what the batch removed.
func TestRestartAfterCrashBetweenCommitAndSave(t *testing.T) {
	dir := t.TempDir()
	store, err := persist.New(dir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Save(&view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{
		"ns/a": svc("ns/a", "1"), "ns/b": svc("ns/b", "1")}}, nil); err != nil {
		t.Fatal(err)
	}
	// The batch s2 (ns/b changed, ns/c added, ns/a removed) was recorded;
	// the process died after its commit, before its save.
	if err := store.Intend(&view.Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{
		"ns/b": svc("ns/b", "2"), "ns/c": svc("ns/c", "1")}, Removed: []string{"ns/a"}}); err != nil {
		t.Fatal(err)
	}
	cp := cptest.New(t)
	cp.Stop()
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir})
	runtest.Eventually(t, "reconcile", func() bool { return len(n.dp.Calls()) > 0 })
	if diff := cmp.Diff([]string{"ns/a", "ns/b", "ns/c"}, n.dp.Services()); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	cp.Restart()
	first := cp.Next()
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "2", "ns/c": "1"}, first.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions (-want +got):\n%s", diff)
	}
	push(cp, "s2", "n1", []string{"ns/a"})
	expectAck(t, cp, "n1", "s2")
	if diff := cmp.Diff([]string{"ns/b", "ns/c"}, n.dp.Services()); diff != "" {
		t.Errorf("after the control plane's answer (-want +got):\n%s", diff)
	}
	if n.dp.Cleanups() != 0 {
		t.Errorf("Cleanups = %d, want 0", n.dp.Cleanups())
	}
}
