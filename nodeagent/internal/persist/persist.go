package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// FileName is the name of the view file inside the state directory.
const FileName = "view.pb"

// LogFileName is the name of the file, next to the view, that holds what
// changed since the view was written: applied changes and the updates
// being committed.
const LogFileName = "changes.log"

// PendingFileName is format 2's record of the update being committed. It
// is never read; a compaction removes a leftover one.
const PendingFileName = "pending.pb"

// defaultCompactBytes is the smallest log worth folding into the view
// file; a larger view waits until the log is as large as it.
const defaultCompactBytes = 256 << 10

// Store saves and loads one node's view in one directory. Intend and Save
// are called from one goroutine (the syncer's); the mutex guards the
// bookkeeping against Load.
type Store struct {
	dir, node string
	// compactBytes: see defaultCompactBytes; tests lower it.
	compactBytes int

	mu sync.Mutex
	// applied is the view the kernel held after the last commit that was
	// saved (or the one loaded); nil when there is nothing to restore.
	applied *view.View
	// pending is every update intended since the last applied record:
	// what the kernel may hold beyond applied.
	pending *view.Update
	// gen is the highest generation on disk; the view file is of gen
	// when viewOK.
	gen    uint64
	viewOK bool
	// base and viewBytes describe the view file.
	base      string
	viewBytes int
	// logOK: the log is of the view file's generation and logLen bytes
	// of it are intact records (logBytes of them records); dirtyTail:
	// bytes after logLen must go before the next append.
	logOK            bool
	logLen, logBytes int
	dirtyTail        bool
}

// New returns the Store of node in dir, creating dir when missing.
func New(dir, node string) (*Store, error) {
	if node == "" {
		return nil, errors.New("state dir: empty node name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	return &Store{dir: dir, node: node, compactBytes: defaultCompactBytes}, nil
}

// Path is the file the view is stored in.
func (s *Store) Path() string { return filepath.Join(s.dir, FileName) }

// LogPath is the file the changes since the view are stored in.
func (s *Store) LogPath() string { return filepath.Join(s.dir, LogFileName) }

// Restored is what Load found.
type Restored struct {
	// View is the view the kernel held after the last saved commit; nil
	// when there is none.
	View *view.View
	// Pending is the updates recorded before commits that were not
	// followed by a save: the kernel may hold their resources. Nil when
	// there are none.
	Pending *view.Update
	// TornTail reports a last log record cut short by a crash and
	// dropped: the call writing it never returned.
	TornTail bool
}

// Found reports whether there is a view to restore.
func (r Restored) Found() bool { return r.View != nil }

// Merged is the view to restore: View with Pending's resources added or
// updated and nothing removed, so that it covers whatever the kernel
// holds, whether the pending commit happened or not. Nil without a view.
func (r Restored) Merged() *view.View {
	if r.View == nil || r.Pending == nil {
		return r.View
	}
	return r.View.WithAdded(r.Pending)
}

// Intend records u before its commit: after it, a Load sees u's resources
// even if the process dies before Save. Until the next Save, the log
// covers every update intended since the last one (a failed commit may
// have left part of its update in the kernel). With no view to restore
// it records nothing: a restart adopts the kernel either way.
//
// When the record cannot be written, Intend removes the view file, so
// that a restart restores nothing (and adopts the kernel as found)
// instead of a view older than the kernel's; the error says whether that
// removal failed too.
func (s *Store) Intend(u *view.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.applied == nil {
		return nil
	}
	err := s.ensureLog()
	if err == nil {
		err = s.append(recIntent, u)
	}
	// Recorded or not, u may reach the kernel: a later rewrite carries it.
	s.pending = view.Merge(s.pending, u)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("record the update before its commit: %w", err)
	if rmErr := os.Remove(s.Path()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		return errors.Join(err, fmt.Errorf("the view file stays and is older than the kernel after this commit: %w", rmErr))
	}
	s.viewOK, s.logOK = false, false
	return fmt.Errorf("%w; view file removed, a restart restores nothing until the next save", err)
}

// Save records v, the view the kernel holds after a commit. changed
// names every resource that may differ from the view of the last Save
// (nil: unknown). Save appends those resources to the log — a few
// hundred bytes for one service — and rewrites the view file whole
// (compaction) only when the log has grown as large as it, or when the
// log cannot be trusted to go on (unknown changes, a failed write, no
// view file).
func (s *Store) Save(v *view.View, changed map[string]struct{}) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied = v
	if changed == nil || !s.logOK || !s.viewOK || s.logBytes >= max(s.viewBytes, s.compactBytes) {
		return s.compact(v)
	}
	names := maps.Clone(changed)
	if p := s.pending; p != nil {
		// The applied view the log replays to lacks what a restore
		// added from them, and what failed commits may have changed.
		for name := range p.Resources {
			names[name] = struct{}{}
		}
		for _, name := range p.Removed {
			names[name] = struct{}{}
		}
	}
	if err := s.append(recApplied, delta(v, names)); err != nil {
		// The intents still cover the kernel; the next Save rewrites.
		s.logOK = false
		return fmt.Errorf("save view: %w", err)
	}
	s.pending = nil
	return nil
}

// ensureLog makes sure the log can be appended to: when it cannot (none,
// an older generation, a failed write), the view file and the log are
// both written anew from what the kernel holds — applied and the intents
// since — as dropping a log that could not be appended to could drop
// applied changes the view file lacks.
func (s *Store) ensureLog() error {
	if s.logOK && s.viewOK {
		return nil
	}
	return s.writeBoth(s.applied, s.pending)
}

// compact writes v as the view file of a new generation and an empty
// log on top of it. A crash in between leaves a log of an older
// generation, which Load ignores: the view file covers it.
func (s *Store) compact(v *view.View) error {
	if err := s.writeBoth(v, nil); err != nil {
		return err
	}
	// Best effort: format 2's record, never read.
	_ = os.Remove(filepath.Join(s.dir, PendingFileName))
	return nil
}

// writeBoth writes v as the view file of a new generation, then a log
// holding pending (what the kernel may hold beyond v). When the log
// cannot be written and pending is not nil, the view file goes too: it
// alone would restore less than the kernel may hold.
func (s *Store) writeBoth(v *view.View, pending *view.Update) error {
	msg := &switchyardv1.StreamSnapshotsResponse{VersionInfo: v.SystemVersion}
	for _, name := range v.Names() {
		msg.Resources = append(msg.Resources, v.Resources[name])
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode view: %w", err)
	}
	gen := s.gen + 1
	s.logOK = false // until both are written: the next write starts over
	if err := writeAtomic(s.dir, FileName, encodeView(header{kind: kindView, node: s.node, version: v.SystemVersion, generation: gen}, payload)); err != nil {
		return fmt.Errorf("save view: %w", err)
	}
	s.gen, s.viewOK, s.base, s.viewBytes = gen, true, v.SystemVersion, len(payload)
	if err := s.writeLog(pending); err != nil {
		if pending == nil {
			// The view file alone is right (v is what the kernel
			// holds); the next Intend starts the log.
			s.pending = nil
			return nil
		}
		if rmErr := os.Remove(s.Path()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
			return errors.Join(err, rmErr)
		}
		s.viewOK = false
		return err
	}
	return nil
}

// writeLog replaces the log with one of the view file's generation
// holding pending as its one intent (nothing when nil); only writeBoth
// calls it, right after the view file.
func (s *Store) writeLog(pending *view.Update) error {
	data := encodeLogHeader(header{kind: kindLog, node: s.node, base: s.base, generation: s.gen})
	head := len(data)
	if pending != nil {
		rec, err := encodeRecord(recIntent, pending)
		if err != nil {
			return err
		}
		data = append(data, rec...)
	}
	if err := writeAtomic(s.dir, LogFileName, data); err != nil {
		return fmt.Errorf("start the log: %w", err)
	}
	s.logOK, s.logLen, s.logBytes, s.dirtyTail = true, len(data), len(data)-head, false
	s.pending = pending
	return nil
}

// append adds one record to the log and fsyncs it. A failed append may
// have left part of the record: it is cut off before the next one.
func (s *Store) append(kind byte, u *view.Update) error {
	rec, err := encodeRecord(kind, u)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(s.LogPath(), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	if s.dirtyTail {
		if err := f.Truncate(int64(s.logLen)); err != nil {
			return fmt.Errorf("cut the log's torn tail: %w", err)
		}
		s.dirtyTail = false
	}
	s.dirtyTail = true // until the record is whole and synced
	if _, err := f.WriteAt(rec, int64(s.logLen)); err != nil {
		return fmt.Errorf("append to log: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync log: %w", err)
	}
	s.dirtyTail = false
	s.logLen += len(rec)
	s.logBytes += len(rec)
	return nil
}

// Load reads the view file and the log on top of it. Missing files are
// not an error (Restored.Found is false); any file that cannot be trusted
// — empty, format 1 or 2, another node's, truncated, altered, or a log of
// another view file — is a *RejectedError and nothing is restored:
// restoring part of the picture could take the kernel back. A log of an
// older generation (a compaction interrupted after its view file) is
// covered by the view file and ignored; a log record torn by a crash is
// dropped (Restored.TornTail) and cut off before the next append.
func (s *Store) Load() (Restored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied, s.pending, s.viewOK, s.logOK = nil, nil, false, false
	v, h, err := s.loadView()
	if h.generation > s.gen {
		s.gen = h.generation
	}
	if err != nil || v == nil {
		s.noteLogGeneration()
		return Restored{}, err
	}
	s.viewOK, s.base = true, h.version
	data, err := s.readFile(s.LogPath())
	if err != nil {
		return Restored{}, err
	}
	if data == nil {
		s.applied = v
		return Restored{View: v}, nil
	}
	lh, off, err := decodeLog(data, s.node)
	if err != nil {
		return Restored{}, s.rejected(s.LogPath(), err)
	}
	switch {
	case lh.generation < h.generation:
		s.applied = v // compacted since: the view file covers it
		return Restored{View: v}, nil
	case lh.generation > h.generation || lh.base != h.version:
		s.gen = max(s.gen, lh.generation)
		return Restored{}, &RejectedError{Path: s.LogPath(), Reason: ReasonMismatch,
			Detail: fmt.Sprintf("it goes on top of generation %d at version %q, the view file is generation %d at %q", lh.generation, lh.base, h.generation, h.version)}
	}
	recs, valid, torn, err := scanRecords(data[off:])
	if err != nil {
		return Restored{}, s.rejected(s.LogPath(), err)
	}
	applied, pending := replay(v, recs)
	s.applied, s.pending = applied, pending
	s.logOK, s.logLen, s.logBytes, s.dirtyTail = true, off+valid, valid, torn
	return Restored{View: applied, Pending: pending, TornTail: torn}, nil
}

// noteLogGeneration raises gen to the log's, when it has a readable
// header, so that the next view file is newer than every file on disk.
func (s *Store) noteLogGeneration() {
	data, err := os.ReadFile(s.LogPath())
	if err != nil {
		return
	}
	if h, _, err := decodeLog(data, s.node); err == nil && h.generation > s.gen {
		s.gen = h.generation
	}
}

// loadView reads and decodes the view file; nil when there is none.
func (s *Store) loadView() (*view.View, header, error) {
	data, err := s.readFile(s.Path())
	if err != nil || data == nil {
		return nil, header{}, err
	}
	h, payload, err := decodeView(data, s.node)
	if err != nil {
		return nil, header{}, s.rejected(s.Path(), err)
	}
	var msg switchyardv1.StreamSnapshotsResponse
	if err := proto.Unmarshal(payload, &msg); err != nil {
		return nil, header{}, &RejectedError{Path: s.Path(), Reason: ReasonDecode, Detail: err.Error()}
	}
	v := &view.View{SystemVersion: msg.GetVersionInfo(), Resources: make(map[string]*switchyardv1.Resource, len(msg.GetResources()))}
	for _, r := range msg.GetResources() {
		v.Resources[r.GetName()] = r
	}
	return v, h, nil
}

// readFile returns path's contents; nil and no error when it does not
// exist, an empty non-nil slice for an empty file.
func (s *Store) readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, &RejectedError{Path: path, Reason: ReasonUnreadable, Detail: err.Error()}
	case data == nil:
		return []byte{}, nil
	}
	return data, nil
}

// rejected sets the path of a rejection from decoding.
func (s *Store) rejected(path string, err error) error {
	if r, ok := errors.AsType[*RejectedError](err); ok {
		r.Path = path
	}
	return err
}

func writeAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
