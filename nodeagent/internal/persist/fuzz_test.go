package persist

import (
	"errors"
	"maps"
	"os"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// FuzzLoad feeds arbitrary view and log files to Store.Load, the path
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
	good := encodeView(header{kind: kindView, node: node, version: "v1", generation: 1}, payload)
	logHead := encodeLogHeader(header{kind: kindLog, node: node, base: "v1", generation: 1})
	intent, err := encodeRecord(recIntent, &view.Update{SystemVersion: "v2", Resources: v.Resources})
	if err != nil {
		f.Fatal(err)
	}
	applied, err := encodeRecord(recApplied, &view.Update{SystemVersion: "v2", Removed: []string{"default/web"}})
	if err != nil {
		f.Fatal(err)
	}
	withRecords := append(append(append([]byte(nil), logHead...), intent...), applied...)
	f.Add(good, []byte(nil))
	f.Add(good, logHead)
	f.Add(good, withRecords)
	f.Add(good, withRecords[:len(withRecords)-7])
	f.Add([]byte{}, []byte(nil))
	f.Add(payload, []byte(nil)) // format 1
	f.Add(good[:len(good)-3], logHead)
	f.Add(encodeView(header{kind: kindView, node: "node-1", version: "v1", generation: 1}, payload), []byte(nil))

	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, viewFile, logFile []byte) {
		s, err := New(dir, node)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.Path(), viewFile, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(s.LogPath())
		if logFile != nil {
			if err := os.WriteFile(s.LogPath(), logFile, 0o600); err != nil {
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
		h, p, err := decodeView(viewFile, node)
		if err != nil {
			t.Fatalf("Load accepted what decodeView rejects: %v", err)
		}
		again, _, err := decodeView(encodeView(h, p), node)
		if err != nil || again != h {
			t.Fatalf("re-encoded header %+v does not decode the same: %+v, %v", h, again, err)
		}
		// Whatever it restored, the store goes on from it: an intent
		// and a save load back as written.
		u := &view.Update{SystemVersion: "fz", Resources: map[string]*switchyardv1.Resource{"ns/fz": {Name: "ns/fz", Version: "1"}}}
		if err := s.Intend(u); err != nil {
			t.Fatalf("Intend after Load: %v", err)
		}
		next := r.Merged().With(u)
		if err := s.Save(next, view.Changed(u)); err != nil {
			t.Fatalf("Save after Load: %v", err)
		}
		back, err := s.Load()
		if err != nil || back.Pending != nil || back.View.SystemVersion != "fz" || !maps.Equal(back.View.Versions(), next.Versions()) {
			t.Fatalf("Load after Intend and Save = %+v, %v; want what was saved, nothing pending", back, err)
		}
	})
}
