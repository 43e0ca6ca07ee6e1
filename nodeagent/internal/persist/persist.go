package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// FileName is the name of the view file inside the state directory.
const FileName = "view.pb"

// Store saves and loads a view in one directory.
type Store struct {
	dir string
}

// New returns a Store in dir, creating dir when missing.
func New(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	return &Store{dir: dir}, nil
}

// Path is the file the view is stored in.
func (s *Store) Path() string { return filepath.Join(s.dir, FileName) }

// Save writes v atomically.
func (s *Store) Save(v *view.View) error {
	msg := &switchyardv1.StreamSnapshotsResponse{VersionInfo: v.SystemVersion}
	for _, name := range v.Names() {
		msg.Resources = append(msg.Resources, v.Resources[name])
	}
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode view: %w", err)
	}
	if err := writeAtomic(s.dir, FileName, data); err != nil {
		return fmt.Errorf("save view: %w", err)
	}
	return nil
}

// Load reads the stored view. With no stored view it returns an empty View
// and found false.
func (s *Store) Load() (v *view.View, found bool, err error) {
	data, err := os.ReadFile(s.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return &view.View{Resources: map[string]*switchyardv1.Resource{}}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("load view: %w", err)
	}
	var msg switchyardv1.StreamSnapshotsResponse
	if err := proto.Unmarshal(data, &msg); err != nil {
		return nil, false, fmt.Errorf("decode view %s: %w", s.Path(), err)
	}
	v = &view.View{SystemVersion: msg.GetVersionInfo(), Resources: make(map[string]*switchyardv1.Resource, len(msg.GetResources()))}
	for _, r := range msg.GetResources() {
		v.Resources[r.GetName()] = r
	}
	return v, true, nil
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
