package dataplanetest

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// LoadState reads <dir>/input.textproto, the golden inputs every mode
// renders: a StreamSnapshotsResponse whose resources are the node's config
// and service views.
func LoadState(t testing.TB, dir string) *dataplane.State {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "input.textproto"))
	if err != nil {
		t.Fatal(err)
	}
	var msg switchyardv1.StreamSnapshotsResponse
	if err := prototext.Unmarshal(raw, &msg); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	st := &dataplane.State{Services: map[string]*switchyardv1.ServiceView{}}
	for _, r := range msg.GetResources() {
		switch {
		case r.GetNodeConfig() != nil:
			st.Config = r.GetNodeConfig()
		case r.GetService() != nil:
			st.Services[r.GetName()] = r.GetService()
		}
	}
	return st
}
