package persist

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ControlPlanesFileName is the name of the file, next to the view, that
// holds the control-plane addresses learnt from the last NodeConfig.
const ControlPlanesFileName = "control-planes.json"

// controlPlanesFile is the JSON shape of ControlPlanesFileName.
type controlPlanesFile struct {
	// Addresses are host:port, in the order the control plane sent them.
	Addresses []string `json:"addresses"`
}

// ControlPlanesPath is the file the learnt control-plane addresses are
// stored in.
func (s *Store) ControlPlanesPath() string { return filepath.Join(s.dir, ControlPlanesFileName) }

// SaveControlPlanes writes the learnt control-plane addresses atomically.
func (s *Store) SaveControlPlanes(addrs []string) error {
	data, err := json.Marshal(controlPlanesFile{Addresses: addrs})
	if err != nil {
		return fmt.Errorf("encode control-plane addresses: %w", err)
	}
	if err := writeAtomic(s.dir, ControlPlanesFileName, append(data, '\n')); err != nil {
		return fmt.Errorf("save control-plane addresses: %w", err)
	}
	return nil
}

// LoadControlPlanes reads the learnt control-plane addresses. A missing
// file is no error: it returns nil and found false. Empty entries are
// dropped.
func (s *Store) LoadControlPlanes() (addrs []string, found bool, err error) {
	data, err := os.ReadFile(s.ControlPlanesPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("load control-plane addresses: %w", err)
	}
	var f controlPlanesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, false, fmt.Errorf("decode control-plane addresses %s: %w", s.ControlPlanesPath(), err)
	}
	for _, a := range f.Addresses {
		if a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs, true, nil
}
