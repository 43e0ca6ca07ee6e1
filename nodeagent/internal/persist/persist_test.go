package persist

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func svc(name, version string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: name, Version: version, Body: &switchyardv1.Resource_Service{
		Service: &switchyardv1.ServiceView{Name: name, ClusterIps: []string{"10.0.0.1"}}}}
}

func newStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := New(dir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLoad(t *testing.T, s *Store) Restored {
	t.Helper()
	r, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSaveLoad(t *testing.T) {
	tests := []struct {
		name string
		v    *view.View
	}{
		{"empty", &view.View{Resources: map[string]*switchyardv1.Resource{}}},
		{"services and config", &view.View{SystemVersion: "sv1", Resources: map[string]*switchyardv1.Resource{
			"ns/a": svc("ns/a", "1"),
			"node": {Name: "node", Version: "2", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{NodeName: "node"}}},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir)
			if err := s.Save(tt.v, nil); err != nil {
				t.Fatal(err)
			}
			r := mustLoad(t, newStore(t, dir))
			if !r.Found() || r.Pending != nil {
				t.Fatalf("Load = %+v, want the view and nothing pending", r)
			}
			if diff := cmp.Diff(tt.v, r.Merged(), protocmp.Transform()); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 2 || entries[0].Name() != LogFileName || entries[1].Name() != FileName {
				t.Errorf("state dir holds %v, want only %s and %s (no temp files left)", entries, LogFileName, FileName)
			}
		})
	}
}

func TestLoadMissing(t *testing.T) {
	s := newStore(t, filepath.Join(t.TempDir(), "sub"))
	if r := mustLoad(t, s); r.Found() || r.Merged() != nil {
		t.Fatalf("Load of missing = %+v", r)
	}
}

func TestSaveReplaces(t *testing.T) {
	s := newStore(t, t.TempDir())
	for _, ver := range []string{"a", "b"} {
		if err := s.Save(&view.View{SystemVersion: ver, Resources: map[string]*switchyardv1.Resource{}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if r := mustLoad(t, s); r.View.SystemVersion != "b" {
		t.Errorf("Load = %+v; want version b", r)
	}
}

// TestLoadRejects: every file that cannot be trusted restores nothing,
// with its reason.
func TestLoadRejects(t *testing.T) {
	v1 := &view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}}
	saved := func(t *testing.T, node string) []byte {
		dir := t.TempDir()
		s, err := New(dir, node)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Save(v1, nil); err != nil {
			t.Fatal(err)
		}
		return mustRead(t, s.Path())
	}
	legacy, err := proto.Marshal(&switchyardv1.StreamSnapshotsResponse{VersionInfo: "s1", Resources: []*switchyardv1.Resource{svc("ns/a", "1")}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		file       func(t *testing.T) []byte
		wantReason string
	}{
		{"empty", func(*testing.T) []byte { return nil }, ReasonEmpty},
		{"format 1", func(*testing.T) []byte { return legacy }, ReasonLegacy},
		{"random", func(*testing.T) []byte { return []byte{0xff, 0xfe, 0x00, 0x13, 0x37} }, ReasonNoHeader},
		{"another node's", func(t *testing.T) []byte { return saved(t, "node-b") }, ReasonNode},
		{"half", func(t *testing.T) []byte { b := saved(t, "node-a"); return b[:len(b)/2] }, ReasonTruncated},
		{"header only", func(t *testing.T) []byte {
			b := saved(t, "node-a")
			return b[:bytes.Index(b, []byte("\n\n"))]
		}, ReasonTruncated},
		{"a payload byte altered", func(t *testing.T) []byte { b := saved(t, "node-a"); b[len(b)-3] ^= 0x40; return b }, ReasonChecksum},
		{"bytes appended", func(t *testing.T) []byte { return append(saved(t, "node-a"), 'x') }, ReasonFormat},
		{"format 2", func(t *testing.T) []byte {
			return bytes.Replace(saved(t, "node-a"), []byte(magic+" 3"), []byte(magic+" 2"), 1)
		}, ReasonFormat},
		{"format 4", func(t *testing.T) []byte {
			return bytes.Replace(saved(t, "node-a"), []byte(magic+" 3"), []byte(magic+" 4"), 1)
		}, ReasonFormat},
		{"a log", func(t *testing.T) []byte {
			return bytes.Replace(saved(t, "node-a"), []byte("kind view"), []byte("kind log"), 1)
		}, ReasonKind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t, t.TempDir())
			if err := os.WriteFile(s.Path(), tt.file(t), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := s.Load()
			reason, ok := IsRejected(err)
			if !ok || reason != tt.wantReason || r.Found() {
				t.Fatalf("Load = %+v, %v; want rejected (%s) and nothing restored", r, err, tt.wantReason)
			}
		})
	}
}

// TestFormat1AgentRejectsHeader: an agent before format 2 decoded view.pb
// as a bare StreamSnapshotsResponse and applied it; the header must make
// that decode fail (a downgrade restores nothing), never yield an empty
// view that it would apply.
func TestFormat1AgentRejectsHeader(t *testing.T) {
	for _, v := range []*view.View{
		{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{}},
		{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}},
	} {
		s := newStore(t, t.TempDir())
		if err := s.Save(v, nil); err != nil {
			t.Fatal(err)
		}
		var msg switchyardv1.StreamSnapshotsResponse
		if err := proto.Unmarshal(mustRead(t, s.Path()), &msg); err == nil {
			t.Errorf("a format-%d file of %d resources decodes as format 1: %v", FormatVersion, len(v.Resources), &msg)
		}
	}
}

// TestIntendBeforeCommit: a crash after Intend and before Save restores
// the saved view with the intended resources added and its removals
// ignored; after the Save the log replays to the new view, nothing
// pending.
func TestIntendBeforeCommit(t *testing.T) {
	v1 := &view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1"), "ns/b": svc("ns/b", "1")}}
	u := &view.Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/b": svc("ns/b", "2"), "ns/c": svc("ns/c", "1")},
		Removed: []string{"ns/a"}}
	dir := t.TempDir()
	s := newStore(t, dir)
	if err := s.Save(v1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Intend(u); err != nil {
		t.Fatal(err)
	}
	// The process dies here: the kernel may hold v1 or v1 with u.
	r := mustLoad(t, newStore(t, dir))
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "2", "ns/c": "1"}, r.Merged().Versions()); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	if r.View.SystemVersion != "s1" || r.Pending.SystemVersion != "s2" || !cmp.Equal(r.Pending.Removed, []string{"ns/a"}) {
		t.Errorf("Load = view %q, pending %q removing %v", r.View.SystemVersion, r.Pending.SystemVersion, r.Pending.Removed)
	}
	before := mustRead(t, s.Path())
	if err := s.Save(v1.With(u), view.Changed(u)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, mustRead(t, s.Path())) {
		t.Error("a one-update Save rewrote the view file; want only a log record")
	}
	r = mustLoad(t, newStore(t, dir))
	if r.Pending != nil || r.View.SystemVersion != "s2" {
		t.Errorf("Load after Save = %+v, want s2 and nothing pending", r)
	}
	if diff := cmp.Diff(map[string]string{"ns/b": "2", "ns/c": "1"}, r.View.Versions()); diff != "" {
		t.Errorf("restored after Save (-want +got):\n%s", diff)
	}
}

// TestIntendAccumulates: a commit that failed (no Save) may have left part
// of its update in the kernel, so the next record covers both.
func TestIntendAccumulates(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	if err := s.Save(&view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, u := range []*view.Update{
		{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}},
		{SystemVersion: "s3", Resources: map[string]*switchyardv1.Resource{"ns/b": svc("ns/b", "1")}, Removed: []string{"ns/a"}},
	} {
		if err := s.Intend(u); err != nil {
			t.Fatal(err)
		}
	}
	r := mustLoad(t, newStore(t, dir))
	if diff := cmp.Diff(map[string]string{"ns/a": "1", "ns/b": "1"}, r.Merged().Versions()); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
}

// TestLogRules: a log of another view file rejects the whole state; an
// intent without a view file is not recorded.
func TestLogRules(t *testing.T) {
	u := &view.Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}}
	for _, tc := range []struct{ name, from, to string }{
		{"another version's", `base "s1"`, `base "s0"`},
		{"a newer generation", "generation 1", "generation 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStore(t, dir)
			if err := s.Save(&view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{}}, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Intend(u); err != nil {
				t.Fatal(err)
			}
			b := mustRead(t, s.LogPath())
			if err := os.WriteFile(s.LogPath(), bytes.Replace(b, []byte(tc.from), []byte(tc.to), 1), 0o600); err != nil {
				t.Fatal(err)
			}
			if r, err := newStore(t, dir).Load(); !isReason(err, ReasonMismatch) || r.Found() {
				t.Errorf("Load = %+v, %v; want rejected (%s)", r, err, ReasonMismatch)
			}
		})
	}
	t.Run("no view file", func(t *testing.T) {
		dir := t.TempDir()
		if err := newStore(t, dir).Intend(u); err != nil {
			t.Fatal(err)
		}
		if r := mustLoad(t, newStore(t, dir)); r.Found() {
			t.Errorf("Load = %+v, want nothing: the first commit ever was interrupted", r)
		}
	})
	t.Run("another node's", func(t *testing.T) {
		dir := t.TempDir()
		s := newStore(t, dir)
		if err := s.Save(&view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{}}, nil); err != nil {
			t.Fatal(err)
		}
		b := mustRead(t, s.LogPath())
		if err := os.WriteFile(s.LogPath(), bytes.Replace(b, []byte(`node "node-a"`), []byte(`node "node-b"`), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		if r, err := newStore(t, dir).Load(); !isReason(err, ReasonNode) || r.Found() {
			t.Errorf("Load = %+v, %v; want rejected (%s)", r, err, ReasonNode)
		}
	})
}

// TestIntendFailureRemovesView: when the record cannot be written, the
// view file goes, so that a restart restores nothing rather than a view
// older than the kernel's; the next Save makes the state whole again.
func TestIntendFailureRemovesView(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	v1 := &view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1")}}
	if err := s.Save(v1, nil); err != nil {
		t.Fatal(err)
	}
	// The log cannot be opened for writing.
	if err := os.Remove(s.LogPath()); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(s.LogPath(), 0o700); err != nil {
		t.Fatal(err)
	}
	u := &view.Update{SystemVersion: "s2", Resources: map[string]*switchyardv1.Resource{"ns/b": svc("ns/b", "1")}}
	if err := s.Intend(u); err == nil {
		t.Fatal("Intend succeeded")
	}
	if r, err := newStore(t, dir).Load(); r.Found() {
		t.Errorf("Load = %+v, %v; want nothing restored", r, err)
	}
	if err := os.Remove(s.LogPath()); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(v1.With(u), view.Changed(u)); err != nil {
		t.Fatal(err)
	}
	if r := mustLoad(t, newStore(t, dir)); !r.Found() || r.View.SystemVersion != "s2" || r.Pending != nil {
		t.Errorf("Load after Save = %+v, want s2", r)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func isReason(err error, want string) bool {
	reason, ok := IsRejected(err)
	return ok && reason == want
}

// BenchmarkSync is the state-file work of one sync that changes one
// Service of 10,000: the intent before the commit (Intend) and the view
// after it (Save), each fsynced. "compact" writes the whole view at every
// Save, as format 2 did; "log" appends the changed Service, compacting
// when the log has grown as large as the view.
func BenchmarkSync(b *testing.B) {
	v := &view.View{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{}}
	for i := range 10_000 {
		name := fmt.Sprintf("ns/s-%05d", i)
		v.Resources[name] = svc(name, "1")
	}
	for _, step := range []struct {
		name    string
		compact bool
	}{{"compact", true}, {"log", false}} {
		b.Run(step.name, func(b *testing.B) {
			s, err := New(b.TempDir(), "node-a")
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Save(v, nil); err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				u := &view.Update{SystemVersion: fmt.Sprint("s", i), Resources: map[string]*switchyardv1.Resource{"ns/s-00001": svc("ns/s-00001", fmt.Sprint(i))}}
				if err := s.Intend(u); err != nil {
					b.Fatal(err)
				}
				v = v.With(u)
				changed := view.Changed(u)
				if step.compact {
					changed = nil
				}
				if err := s.Save(v, changed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
