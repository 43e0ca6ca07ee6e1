package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestOverlaysListEveryNode: an agent's first boot reaches the control
// plane only through the addresses its ConfigMap lists, and the scheduler
// may put both replicas on any node; a 6-node bed once had them on nodes
// 4 and 5 with only nodes 0-2 listed, and no agent ever connected.
func TestOverlaysListEveryNode(t *testing.T) {
	for _, overlay := range []string{OverlayBase, OverlayPlaintext, OverlayMTLS} {
		b, err := os.ReadFile(filepath.Join("overlays", overlay, "agent-config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range MaxNodes {
			if addr := fmt.Sprintf("%s:%d", NodeIP(i), GRPCPort); !containsWord(string(b), addr) {
				t.Errorf("overlays/%s/agent-config.yaml: controlPlanes lacks node %d (%s)", overlay, i, addr)
			}
		}
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w && (i+len(w) == len(s) || s[i+len(w)] < '0' || s[i+len(w)] > '9') {
			return true
		}
	}
	return false
}
