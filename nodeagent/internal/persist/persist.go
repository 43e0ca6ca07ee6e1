package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// FileName is the name of the view file inside the state directory.
const FileName = "view.pb"

// PendingFileName is the name of the file, next to the view, that holds
// what the kernel may hold beyond it: the update being committed.
const PendingFileName = "pending.pb"

// Store saves and loads one node's view in one directory. Intend and Save
// are called from one goroutine (the syncer's); the mutex guards the
// bookkeeping against Load.
type Store struct {
	dir, node string

	mu sync.Mutex
	// base is the version of the view file on disk ("" for none).
	base string
	// pending is what pending.pb holds: every update intended since the
	// view file was saved; nil when none.
	pending *view.Update
}

// New returns the Store of node in dir, creating dir when missing.
func New(dir, node string) (*Store, error) {
	if node == "" {
		return nil, errors.New("state dir: empty node name")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	return &Store{dir: dir, node: node}, nil
}

// Path is the file the view is stored in.
func (s *Store) Path() string { return filepath.Join(s.dir, FileName) }

// PendingPath is the file the update being committed is stored in.
func (s *Store) PendingPath() string { return filepath.Join(s.dir, PendingFileName) }

// Restored is what Load found.
type Restored struct {
	// View is the view file's view; nil when there is none.
	View *view.View
	// Pending is the update recorded before a commit that was not
	// followed by a save: the kernel may hold its resources. Nil when
	// there is none.
	Pending *view.Update
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
// even if the process dies before Save. It accumulates: until the next
// Save, the record covers every update intended since the last one (a
// failed commit may have left part of its update in the kernel).
//
// When the record cannot be written, Intend removes the view file, so
// that a restart restores nothing (and adopts the kernel as found)
// instead of a view older than the kernel's; the error says whether that
// removal failed too.
func (s *Store) Intend(u *view.Update) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := view.Merge(s.pending, u)
	payload, err := encodeUpdate(next)
	if err == nil {
		err = writeAtomic(s.dir, PendingFileName, encode(header{kind: kindPending, node: s.node, version: next.SystemVersion, base: s.base}, payload))
	}
	if err == nil {
		s.pending = next
		return nil
	}
	err = fmt.Errorf("record the update before its commit: %w", err)
	if rmErr := os.Remove(s.Path()); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		return errors.Join(err, fmt.Errorf("the view file stays and is older than the kernel after this commit: %w", rmErr))
	}
	s.base, s.pending = "", nil
	return fmt.Errorf("%w; view file removed, a restart restores nothing until the next save", err)
}

// Save writes v, the view the kernel holds after a commit, atomically,
// then drops the pending record (a leftover one, whose version is v's, is
// ignored by Load).
func (s *Store) Save(v *view.View) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg := &switchyardv1.StreamSnapshotsResponse{VersionInfo: v.SystemVersion}
	for _, name := range v.Names() {
		msg.Resources = append(msg.Resources, v.Resources[name])
	}
	payload, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode view: %w", err)
	}
	if err := writeAtomic(s.dir, FileName, encode(header{kind: kindView, node: s.node, version: v.SystemVersion}, payload)); err != nil {
		return fmt.Errorf("save view: %w", err)
	}
	s.base, s.pending = v.SystemVersion, nil
	// Best effort: a leftover record is recognised as saved.
	_ = os.Remove(s.PendingPath())
	return nil
}

// Load reads the view file and, where it belongs to that view, the
// pending record. Missing files are not an error (Restored.Found is
// false); any file that cannot be trusted — empty, format 1, another
// node's, truncated, altered, or a pending record of another view — is a
// *RejectedError and nothing is restored: restoring part of the picture
// could take the kernel back. A pending record without a view file is
// ignored (the first commit ever was interrupted; the kernel is adopted).
func (s *Store) Load() (Restored, error) {
	v, err := s.loadView()
	if err != nil || v == nil {
		return Restored{}, err
	}
	p, err := s.loadPending(v.SystemVersion)
	if err != nil {
		return Restored{}, err
	}
	s.mu.Lock()
	s.base, s.pending = v.SystemVersion, p
	s.mu.Unlock()
	return Restored{View: v, Pending: p}, nil
}

func (s *Store) loadView() (*view.View, error) {
	payload, _, err := s.read(s.Path(), kindView)
	if err != nil || payload == nil {
		return nil, err
	}
	var msg switchyardv1.StreamSnapshotsResponse
	if err := proto.Unmarshal(payload, &msg); err != nil {
		return nil, &RejectedError{Path: s.Path(), Reason: ReasonDecode, Detail: err.Error()}
	}
	v := &view.View{SystemVersion: msg.GetVersionInfo(), Resources: make(map[string]*switchyardv1.Resource, len(msg.GetResources()))}
	for _, r := range msg.GetResources() {
		v.Resources[r.GetName()] = r
	}
	return v, nil
}

// loadPending returns the pending record that goes on top of the view
// file at version base; nil when there is none or it was saved since.
func (s *Store) loadPending(base string) (*view.Update, error) {
	payload, h, err := s.read(s.PendingPath(), kindPending)
	if err != nil || payload == nil {
		return nil, err
	}
	switch {
	case h.base == base:
	case h.version == base:
		return nil, nil // committed and saved; only its removal was lost
	default:
		return nil, &RejectedError{Path: s.PendingPath(), Reason: ReasonMismatch,
			Detail: fmt.Sprintf("it goes on top of version %q, the view file is at %q", h.base, base)}
	}
	var msg switchyardv1.DeltaSnapshotsResponse
	if err := proto.Unmarshal(payload, &msg); err != nil {
		return nil, &RejectedError{Path: s.PendingPath(), Reason: ReasonDecode, Detail: err.Error()}
	}
	u := &view.Update{SystemVersion: msg.GetSystemVersion(), Resources: make(map[string]*switchyardv1.Resource, len(msg.GetResources())),
		Removed: msg.GetRemovedResources()}
	for _, r := range msg.GetResources() {
		u.Resources[r.GetName()] = r
	}
	return u, nil
}

// read returns path's checked payload and header; a nil payload and no
// error when the file does not exist.
func (s *Store) read(path, kind string) ([]byte, header, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, header{}, nil
	}
	if err != nil {
		return nil, header{}, &RejectedError{Path: path, Reason: ReasonUnreadable, Detail: err.Error()}
	}
	h, payload, err := decode(data, kind, s.node)
	if r, ok := errors.AsType[*RejectedError](err); ok {
		r.Path = path
		return nil, header{}, r
	}
	if payload == nil {
		payload = []byte{} // an empty view is a view
	}
	return payload, h, nil
}

// encodeUpdate is u as a DeltaSnapshotsResponse, resources and removed
// names sorted (deterministic).
func encodeUpdate(u *view.Update) ([]byte, error) {
	msg := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: u.SystemVersion, RemovedResources: append([]string(nil), u.Removed...)}
	sort.Strings(msg.RemovedResources)
	names := make([]string, 0, len(u.Resources))
	for name := range u.Resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msg.Resources = append(msg.Resources, u.Resources[name])
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode update: %w", err)
	}
	return b, nil
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
