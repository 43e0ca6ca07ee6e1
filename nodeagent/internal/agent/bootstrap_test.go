package agent

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func nodeConfig(version string, addrs ...string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: "node-a", Version: version, Body: &switchyardv1.Resource_NodeConfig{
		NodeConfig: &switchyardv1.NodeConfig{NodeName: "node-a", ControlPlaneAddresses: addrs},
	}}
}

func loadControlPlanes(t *testing.T, dir string) []string {
	t.Helper()
	store, err := persist.New(dir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	addrs, _, err := store.LoadControlPlanes()
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// TestLearntControlPlanesSurviveRestart: the addresses a NodeConfig
// carries are persisted mid-stream and, after a restart, dialled before
// the configured address (which may need a Service VIP the node does not
// have yet).
func TestLearntControlPlanesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	configured, replica := cptest.New(t), cptest.New(t)
	first := startNode(t, nodeOpts{addrs: []string{configured.Addr()}, stateDir: dir})
	configured.Next()
	push(configured, "s1", "n1", nil, nodeConfig("1", replica.Addr()), svc("ns/a", "1"))
	expectAck(t, configured, "n1", "s1")
	if diff := cmp.Diff([]string{replica.Addr()}, loadControlPlanes(t, dir)); diff != "" {
		t.Errorf("persisted control planes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{replica.Addr(), configured.Addr()}, first.a.ControlPlanes()); diff != "" {
		t.Errorf("dial order (-want +got):\n%s", diff)
	}
	// Still the first stream.
	push(configured, "s2", "n2", nil, svc("ns/a", "2"))
	if r := configured.Next(); r.Stream != 1 || r.GetAppliedVersion() != "s2" {
		t.Fatalf("ACK on the first stream = %v", r)
	}
	first.stop()

	second := startNode(t, nodeOpts{addrs: []string{configured.Addr()}, stateDir: dir})
	r := replica.Next()
	if diff := cmp.Diff(map[string]string{"node-a": "1", "ns/a": "2"}, r.GetInitialResourceVersions()); diff != "" {
		t.Errorf("initial_resource_versions on the learnt replica (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{replica.Addr(), configured.Addr()}, second.a.ControlPlanes()); diff != "" {
		t.Errorf("dial order after restart (-want +got):\n%s", diff)
	}
	if n := configured.Streams(); n != 1 {
		t.Errorf("configured address got %d streams, want only the first agent's", n)
	}
}

func TestLearntControlPlanesAtStart(t *testing.T) {
	replica := cptest.New(t)
	tests := []struct {
		name string
		// file is control-planes.json's content; nil: no file.
		file *string
		// viewAddrs go into the persisted view's NodeConfig.
		viewAddrs []string
		wantOrder func(configured string) []string
		wantLog   string
		// wantFile is the file's list after start; nil: as it was.
		wantFile []string
	}{
		{
			name:      "nothing learnt: configured only",
			wantOrder: func(c string) []string { return []string{c} },
		},
		{
			name:      "unreadable file: warn, configured only",
			file:      strPtr("not json"),
			wantOrder: func(c string) []string { return []string{c} },
			wantLog:   `level=WARN msg="ignoring unreadable control-plane addresses`,
		},
		{
			name:      "empty file: warn, configured only",
			file:      strPtr(`{"addresses": []}`),
			wantOrder: func(c string) []string { return []string{c} },
			wantLog:   `level=WARN msg="persisted control-plane addresses are empty`,
		},
		{
			name:      "no file: the restored view's NodeConfig, then persisted",
			viewAddrs: []string{replica.Addr()},
			wantOrder: func(c string) []string { return []string{replica.Addr(), c} },
			wantLog:   "control-plane addresses taken from the restored view",
			wantFile:  []string{replica.Addr()},
		},
		{
			name:      "the file wins over the view",
			file:      strPtr(`{"addresses": ["` + replica.Addr() + `"]}`),
			viewAddrs: []string{"10.9.9.9:18000"},
			wantOrder: func(c string) []string { return []string{replica.Addr(), c} },
			wantLog:   "restored learnt control-plane addresses",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store, err := persist.New(dir, "node-a")
			if err != nil {
				t.Fatal(err)
			}
			if tc.file != nil {
				if err := os.WriteFile(store.ControlPlanesPath(), []byte(*tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.viewAddrs != nil {
				v := &view.View{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{"node-a": nodeConfig("0", tc.viewAddrs...)}}
				if err := store.Save(v, nil); err != nil {
					t.Fatal(err)
				}
			}
			configured := cptest.New(t)
			var log runtest.Buffer
			n := startNode(t, nodeOpts{addrs: []string{configured.Addr()}, stateDir: dir, log: &log})
			if diff := cmp.Diff(tc.wantOrder(configured.Addr()), n.a.ControlPlanes()); diff != "" {
				t.Errorf("dial order (-want +got):\n%s", diff)
			}
			if !strings.Contains(log.String(), tc.wantLog) {
				t.Errorf("log lacks %q:\n%s", tc.wantLog, log.String())
			}
			if tc.wantFile != nil {
				if diff := cmp.Diff(tc.wantFile, loadControlPlanes(t, dir)); diff != "" {
					t.Errorf("persisted control planes (-want +got):\n%s", diff)
				}
			}
			// The first stream goes to the first address of the order.
			if tc.wantOrder("")[0] == "" {
				configured.Next()
			} else {
				replica.Next()
			}
			n.stop()
		})
	}
}

func strPtr(s string) *string { return &s }
