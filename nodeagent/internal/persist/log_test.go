package persist

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func update(version string, removed []string, rs ...*switchyardv1.Resource) *view.Update {
	u := &view.Update{SystemVersion: version, Resources: map[string]*switchyardv1.Resource{}, Removed: removed}
	for _, r := range rs {
		u.Resources[r.GetName()] = r
	}
	return u
}

// logged is a store in dir holding s1 = {a, b} compacted, then s2 (b
// changed, a removed) appended, then an intent of s3 (c added): what
// the log looks like in the middle of a sync.
func logged(t *testing.T, dir string) (s *Store, v2 *view.View, u3 *view.Update) {
	t.Helper()
	s = newStore(t, dir)
	v1 := &view.View{SystemVersion: "s1", Resources: map[string]*switchyardv1.Resource{"ns/a": svc("ns/a", "1"), "ns/b": svc("ns/b", "1")}}
	if err := s.Save(v1, nil); err != nil {
		t.Fatal(err)
	}
	u2 := update("s2", []string{"ns/a"}, svc("ns/b", "2"))
	if err := s.Intend(u2); err != nil {
		t.Fatal(err)
	}
	v2 = v1.With(u2)
	if err := s.Save(v2, view.Changed(u2)); err != nil {
		t.Fatal(err)
	}
	u3 = update("s3", nil, svc("ns/c", "1"))
	if err := s.Intend(u3); err != nil {
		t.Fatal(err)
	}
	return s, v2, u3
}

// TestTornLastRecord cuts the log at every byte of its last record (the
// intent of s3), as a crash during its append would: the record is
// dropped and s2 restored with nothing pending, and the next append cuts
// the torn bytes off so the log stays readable.
func TestTornLastRecord(t *testing.T) {
	dir := t.TempDir()
	s, v2, u3 := logged(t, dir)
	whole := mustRead(t, s.LogPath())
	rec, err := encodeRecord(recIntent, u3)
	if err != nil {
		t.Fatal(err)
	}
	start := len(whole) - len(rec)
	for cut := start; cut <= len(whole); cut++ {
		if err := os.WriteFile(s.LogPath(), whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		r := mustLoad(t, newStore(t, dir))
		wantTorn, wantPending := cut > start && cut < len(whole), cut == len(whole)
		if r.TornTail != wantTorn || (r.Pending != nil) != wantPending || !maps.Equal(r.View.Versions(), v2.Versions()) {
			t.Fatalf("log cut at byte %d of %d: Load = view %v, pending %v, torn %v; want s2, pending %v, torn %v",
				cut, len(whole), r.View.Versions(), r.Pending, r.TornTail, wantPending, wantTorn)
		}
	}
	// Torn at its middle; a restart goes on appending.
	if err := os.WriteFile(s.LogPath(), whole[:start+len(rec)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	again := newStore(t, dir)
	mustLoad(t, again)
	u4 := update("s4", nil, svc("ns/d", "1"))
	if err := again.Intend(u4); err != nil {
		t.Fatal(err)
	}
	r := mustLoad(t, newStore(t, dir))
	if r.TornTail || r.Pending == nil || r.Pending.SystemVersion != "s4" || len(r.Pending.Resources) != 1 {
		t.Errorf("after an append on a torn log: Load = %+v; want s4's intent alone, nothing torn", r)
	}
}

// TestDamagedRecordRejected: a record that was written whole and is not
// what was written — before the last one, or with zeros only after it
// where they are not a tail — rejects the state; a damaged last record
// is one a crash tore.
func TestDamagedRecordRejected(t *testing.T) {
	dir := t.TempDir()
	s, _, _ := logged(t, dir)
	whole := mustRead(t, s.LogPath())
	_, off, err := decodeLog(whole, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		at         int // byte flipped, from the first record
		wantReason string
	}{
		{"the first record's head", 2, ReasonChecksum},
		{"the first record's payload", recHead + 3, ReasonChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(whole)
			b[off+tc.at] ^= 0x20
			if err := os.WriteFile(s.LogPath(), b, 0o600); err != nil {
				t.Fatal(err)
			}
			if r, err := newStore(t, dir).Load(); !isReason(err, tc.wantReason) || r.Found() {
				t.Errorf("Load = %+v, %v; want rejected (%s)", r, err, tc.wantReason)
			}
		})
	}
	t.Run("the last record's payload", func(t *testing.T) {
		b := slices.Clone(whole)
		b[len(b)-recSum-2] ^= 0x20
		if err := os.WriteFile(s.LogPath(), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if r := mustLoad(t, newStore(t, dir)); !r.TornTail || r.Pending != nil {
			t.Errorf("Load = %+v; want the last record dropped as torn", r)
		}
	})
	t.Run("zeros after the last record", func(t *testing.T) {
		if err := os.WriteFile(s.LogPath(), append(slices.Clone(whole), make([]byte, 100)...), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := mustLoad(t, newStore(t, dir)); !r.TornTail || r.Pending == nil {
			t.Errorf("Load = %+v; want every record, the zeros dropped", r)
		}
	})
}

// TestCompactionInterrupted: a crash after compaction wrote its view file
// and before it wrote the new log leaves the old log, of an older
// generation: it is ignored, the view file covers it.
func TestCompactionInterrupted(t *testing.T) {
	dir := t.TempDir()
	s, v2, u3 := logged(t, dir)
	old := mustRead(t, s.LogPath())
	s.compactBytes = 0 // the next Save compacts
	v3 := v2.With(u3)
	if err := s.Save(v3, view.Changed(u3)); err != nil {
		t.Fatal(err)
	}
	if fresh := mustRead(t, s.LogPath()); len(fresh) >= len(old) {
		t.Fatalf("Save did not compact: log of %d bytes, was %d", len(fresh), len(old))
	}
	if err := os.WriteFile(s.LogPath(), old, 0o600); err != nil {
		t.Fatal(err)
	}
	again := newStore(t, dir)
	r := mustLoad(t, again)
	if r.Pending != nil || !maps.Equal(r.View.Versions(), v3.Versions()) || r.View.SystemVersion != "s3" {
		t.Fatalf("Load = %+v; want s3 from the view file, the old log ignored", r)
	}
	// The next intent starts a log of the view file's generation.
	if err := again.Intend(update("s4", nil, svc("ns/d", "1"))); err != nil {
		t.Fatal(err)
	}
	if r := mustLoad(t, newStore(t, dir)); r.Pending == nil || r.View.SystemVersion != "s3" {
		t.Errorf("Load after an intent = %+v; want s3 and s4 pending", r)
	}
}

// TestSaveCompactsWhenLogOutgrowsView: the log is folded into the view
// file once it is as large, so neither grows without bound.
func TestSaveCompactsWhenLogOutgrowsView(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir)
	s.compactBytes = 0
	v := &view.View{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{}}
	for i := range 20 {
		r := svc(fmt.Sprintf("ns/s%d", i), "0")
		v.Resources[r.Name] = r
	}
	if err := s.Save(v, nil); err != nil {
		t.Fatal(err)
	}
	viewSize := len(mustRead(t, s.Path()))
	compactions := 0
	for i := 1; i <= 200; i++ {
		u := update(fmt.Sprint("s", i), nil, svc(fmt.Sprintf("ns/s%d", i%20), fmt.Sprint(i)))
		if err := s.Intend(u); err != nil {
			t.Fatal(err)
		}
		before := s.gen
		v = v.With(u)
		if err := s.Save(v, view.Changed(u)); err != nil {
			t.Fatal(err)
		}
		if s.gen != before {
			compactions++
		}
		if n := len(mustRead(t, s.LogPath())); n > 3*viewSize {
			t.Fatalf("sync %d: log of %d bytes, view of %d", i, n, viewSize)
		}
	}
	if compactions == 0 || compactions > 100 {
		t.Errorf("%d compactions in 200 syncs; want some, not one per sync", compactions)
	}
	if r := mustLoad(t, newStore(t, dir)); r.View.SystemVersion != "s200" || !maps.Equal(r.View.Versions(), v.Versions()) {
		t.Errorf("Load = %v %v; want s200 as saved", r.View.SystemVersion, r.View.Versions())
	}
}

// TestFailedAppendIsCutOff: an append that failed half-way left bytes
// after the last record; the next one writes over them.
func TestFailedAppendIsCutOff(t *testing.T) {
	dir := t.TempDir()
	s, v2, u3 := logged(t, dir)
	f, err := os.OpenFile(s.LogPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("\x41\x00\x00\x10garbage of a failed write")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s.dirtyTail = true
	v3 := v2.With(u3)
	if err := s.Save(v3, view.Changed(u3)); err != nil {
		t.Fatal(err)
	}
	if r := mustLoad(t, newStore(t, dir)); r.TornTail || r.Pending != nil || !maps.Equal(r.View.Versions(), v3.Versions()) {
		t.Errorf("Load = %+v; want s3 whole, nothing torn", r)
	}
}

// TestStoreMatchesModel drives random syncs — batches recorded, committed
// or failed, saved, restarts that load and go on — through a store that
// compacts now and then, and checks every restart against the model: the
// view of the last saved commit, and every batch intended since merged.
func TestStoreMatchesModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { storeMatchesModel(t, seed) })
	}
}

func storeMatchesModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(7, seed))
	dir := t.TempDir()
	s := newStore(t, dir)
	s.compactBytes = 300 + rng.IntN(3000)
	saved := &view.View{SystemVersion: "s0", Resources: map[string]*switchyardv1.Resource{}}
	if err := s.Save(saved, nil); err != nil {
		t.Fatal(err)
	}
	applied := saved // the syncer's applied view
	var pending *view.Update
	for step := 1; step <= 300; step++ {
		u := update(fmt.Sprint("s", step), nil)
		for range 1 + rng.IntN(3) {
			name := fmt.Sprintf("ns/s%d", rng.IntN(12))
			if rng.IntN(4) == 0 {
				u.Removed = append(u.Removed, name)
			} else {
				u.Resources[name] = svc(name, fmt.Sprint(step))
			}
		}
		if err := s.Intend(u); err != nil {
			t.Fatal(err)
		}
		pending = view.Merge(pending, u)
		switch k := rng.IntN(10); {
		case k < 7: // committed and saved
			applied = applied.With(u)
			if err := s.Save(applied, view.Changed(u)); err != nil {
				t.Fatal(err)
			}
			saved, pending = applied, nil
		case k < 8: // the commit failed: nothing saved, the intent stays
			if rng.IntN(2) == 0 {
				// The repair sync after it programs applied again and
				// saves it, with no batch of its own.
				if err := s.Save(applied, map[string]struct{}{}); err != nil {
					t.Fatal(err)
				}
				saved, pending = applied, nil
			}
		default: // the process dies after the commit, before the save
			r := mustLoad(t, newStore(t, dir))
			if diff := cmp.Diff(saved.Versions(), r.View.Versions()); diff != "" || r.View.SystemVersion != saved.SystemVersion {
				t.Fatalf("step %d: restored view (-saved +restored):\n%s", step, diff)
			}
			if diff := cmp.Diff(pending, r.Pending, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b *switchyardv1.Resource) bool {
				return a.GetVersion() == b.GetVersion()
			})); diff != "" {
				t.Fatalf("step %d: restored intents (-model +restored):\n%s", step, diff)
			}
			// The restart reconciles the kernel to the merged view and
			// goes on from it with the loaded store.
			s = newStore(t, dir)
			s.compactBytes = 300 + rng.IntN(3000)
			r = mustLoad(t, s)
			applied = r.Merged()
		}
	}
	if s.gen < 3 {
		t.Errorf("generation %d after 300 syncs: the log was never compacted", s.gen)
	}
}
