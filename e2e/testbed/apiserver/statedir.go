package apiserver

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// State directories are named with this prefix and hold an owner file with
// the pid of the process that created them.
const (
	stateDirPrefix = "switchyard-apiserver-"
	ownerFile      = "owner.pid"
)

func makeStateDir(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, stateDirPrefix)
	if err != nil {
		return "", fmt.Errorf("create state dir: %w", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(dir, ownerFile), pid, 0o600); err != nil {
		return "", errors.Join(fmt.Errorf("create state dir: %w", err), os.RemoveAll(dir))
	}
	return dir, nil
}

// sweepStale removes state directories whose owner process is gone. Cleanup
// does not run when a test binary is killed or panics on -timeout;
// Pdeathsig takes the children down then, and this takes their files.
func sweepStale(parent string, log *slog.Logger) {
	if parent == "" {
		parent = os.TempDir()
	}
	dirs, err := filepath.Glob(filepath.Join(parent, stateDirPrefix+"*"))
	if err != nil {
		return
	}
	for _, dir := range dirs {
		if !ownerGone(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("cannot remove stale state dir", "dir", dir, "err", err)
			continue
		}
		log.Info("removed stale state dir", "dir", dir)
	}
}

// ownerGone reports whether dir's owner file names a process that no longer
// exists. Directories without a readable owner file are left alone.
func ownerGone(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
