package dataplanetest_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
)

// TestViewsLoad: every golden input parses into a State with a node.
func TestViewsLoad(t *testing.T) {
	names := dataplanetest.Views()
	if len(names) == 0 {
		t.Fatal("no views embedded")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			st := dataplanetest.LoadState(t, name)
			if st.Config.GetNodeName() == "" {
				t.Error("no NodeConfig")
			}
		})
	}
}

func TestReadStateUnknownCase(t *testing.T) {
	if _, err := dataplanetest.ReadState("no-such-case"); err == nil {
		t.Error("ReadState of a missing case succeeded")
	}
}
