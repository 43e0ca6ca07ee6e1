package persist

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Remove deletes what a Store keeps in dir: the view, its log (and
// format 2's pending record), the learnt control-plane addresses and
// temporary files an interrupted save left. It creates nothing: a missing dir holds nothing.
// Other files, and dir itself (a hostPath the DaemonSet owns), stay. It
// returns the paths it removed.
func Remove(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !isStateFile(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil {
			errs = append(errs, err) // a *fs.PathError: "remove <path>: …"
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}

// isStateFile reports the names a Store writes (writeAtomic's temporary
// files are "." + name + ".tmp-*").
func isStateFile(name string) bool {
	for _, n := range []string{FileName, LogFileName, PendingFileName, ControlPlanesFileName} {
		if name == n || strings.HasPrefix(name, "."+n+".tmp-") {
			return true
		}
	}
	return false
}
