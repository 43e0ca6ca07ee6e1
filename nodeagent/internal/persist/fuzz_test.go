package persist

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// FuzzLoad feeds arbitrary view and pending files to Store.Load, the path
// every agent start takes: it must never panic, and whatever it accepts
// must be exactly what some agent of this node could have written —
// anything else is a *RejectedError with a reason, never a partial view.
func FuzzLoad(f *testing.F) {
	const node = "node-0"
	v := &view.View{SystemVersion: "v1", Resources: map[string]*switchyardv1.Resource{
		"default/web": {Name: "default/web", Version: "a1"},
	}}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(&switchyardv1.StreamSnapshotsResponse{
		VersionInfo: "v1", Resources: []*switchyardv1.Resource{v.Resources["default/web"]}})
	if err != nil {
		f.Fatal(err)
	}
	good := encode(header{kind: kindView, node: node, version: "v1"}, payload)
	pending := encode(header{kind: kindPending, node: node, version: "v2", base: "v1"}, payload)
	f.Add(good, []byte(nil))
	f.Add(good, pending)
	f.Add([]byte{}, []byte(nil))
	f.Add(payload, []byte(nil)) // format 1
	f.Add(good[:len(good)-3], pending)
	f.Add(encode(header{kind: kindView, node: "node-1", version: "v1"}, payload), []byte(nil))

	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, viewFile, pendingFile []byte) {
		s, err := New(dir, node)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Path(), viewFile, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(s.PendingPath())
		if pendingFile != nil {
			if err := os.WriteFile(filepath.Join(dir, PendingFileName), pendingFile, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.Load()
		if err != nil {
			if _, ok := IsRejected(err); !ok {
				var pe *os.PathError
				if !errors.As(err, &pe) {
					t.Fatalf("Load error %v is neither a rejection nor an I/O error", err)
				}
			}
			if r.Found() {
				t.Fatalf("Load rejected the files (%v) but restored a view", err)
			}
			return
		}
		if !r.Found() {
			t.Fatal("Load accepted a view file but restored nothing")
		}
		// Accepted: the header named this node and its checksum held, so
		// the same view re-encodes to a file that loads the same.
		h, p, err := decode(viewFile, kindView, node)
		if err != nil {
			t.Fatalf("Load accepted what decode rejects: %v", err)
		}
		again, _, err := decode(encode(h, p), kindView, node)
		if err != nil || again != h {
			t.Fatalf("re-encoded header %+v does not decode the same: %+v, %v", h, again, err)
		}
	})
}
