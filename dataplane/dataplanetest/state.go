package dataplanetest

import (
	"embed"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The golden inputs every mode renders, one file per case, in one place:
// each mode keeps only its goldens (testdata/<case>/want.*), so an input
// changed here changes every mode's output at once.
//
//go:embed views/*.textproto
var views embed.FS

const viewExt = ".textproto"

// Views lists the case names of the golden inputs (views/<case>.textproto),
// sorted.
func Views() []string {
	entries, err := views.ReadDir("views")
	if err != nil {
		panic(fmt.Sprintf("dataplanetest: embedded views: %v", err)) // the embed pattern guarantees the directory
	}
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), viewExt))
	}
	slices.Sort(out)
	return out
}

// NewState is the State of a node with config cfg and the views svcs,
// each under its resource name ("namespace/name"), as the agent keys
// them.
func NewState(cfg *switchyardv1.NodeConfig, svcs ...*switchyardv1.ServiceView) *dataplane.State {
	st := &dataplane.State{Config: cfg, Services: make(map[string]*switchyardv1.ServiceView, len(svcs))}
	for _, sv := range svcs {
		st.Services[sv.GetNamespace()+"/"+sv.GetName()] = sv
	}
	return st
}

// LoadState reads the golden input of case name: a StreamSnapshotsResponse
// whose resources are the node's config and service views.
func LoadState(t testing.TB, name string) *dataplane.State {
	t.Helper()
	st, err := ReadState(name)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// ReadState is LoadState for callers without a testing.TB.
func ReadState(name string) (*dataplane.State, error) {
	raw, err := views.ReadFile(path.Join("views", name+viewExt))
	if err != nil {
		return nil, fmt.Errorf("golden input %q: %w", name, err)
	}
	var msg switchyardv1.StreamSnapshotsResponse
	if err := prototext.Unmarshal(raw, &msg); err != nil {
		return nil, fmt.Errorf("golden input %q: %w", name, err)
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
	return st, nil
}
