package netns

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// ErrHostNamespace is returned (wrapped) when an operation targets the
// machine's own network namespace.
var ErrHostNamespace = errors.New("refusing to act in the host network namespace")

// ErrUnknownNamespace is returned (wrapped) when an operation names a
// namespace that the topology did not create.
var ErrUnknownNamespace = errors.New("namespace does not belong to this topology")

// IsHostNamespace reports whether err was caused by the host guard.
func IsHostNamespace(err error) bool { return errors.Is(err, ErrHostNamespace) }

// nsID identifies a namespace by the device and inode of its nsfs file.
type nsID struct{ dev, ino uint64 }

func (id nsID) String() string { return fmt.Sprintf("net:[%d]", id.ino) }

// initNetIno is PROC_NET_INIT_INO, the fixed inode number of the initial
// network namespace on current kernels (on older ones it is never allocated,
// so refusing it is harmless).
const initNetIno = 0xEFFFFFF9

// HostGuard refuses namespaces that must never be modified: the one of PID 1,
// the initial namespace (init_net), and the one this process runs in.
//
// Reading /proc/1/ns/net needs ptrace access to PID 1, which a root process
// without CAP_SYS_PTRACE (as in some sandboxes) does not have. Then the guard
// relies on the other three; Topology additionally checks that every
// namespace it creates starts out with nothing but lo, which the machine's
// namespace never does. Everything else fails closed.
type HostGuard struct {
	forbidden map[nsID]string
	process   nsID
	// Unverified lists the sources that could not be read (permission).
	Unverified []string
}

// NewHostGuard records the forbidden namespaces. Call it from an ordinary
// goroutine, never from inside Do.
func NewHostGuard() (*HostGuard, error) {
	g := &HostGuard{forbidden: map[nsID]string{}}
	// The calling goroutine is not locked to a thread, so its thread is in
	// the process's original namespace (only locked threads ever switch).
	// /proc/self is the main thread, which Go may lend to a goroutine inside
	// Do at this very moment: it is forbidden too, but not the reference.
	sources := []struct {
		path, who string
		optional  bool
	}{
		{"/proc/thread-self/ns/net", "this process", false},
		{"/proc/self/ns/net", "this process's main thread", false},
		{"/proc/1/ns/net", "PID 1", true},
	}
	for i, src := range sources {
		id, err := statNS(src.path)
		if src.optional && (errors.Is(err, fs.ErrPermission)) {
			g.Unverified = append(g.Unverified, fmt.Sprintf("%s: %v", src.path, err))
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("host guard: %w", err)
		}
		if _, dup := g.forbidden[id]; !dup {
			g.forbidden[id] = src.who
		}
		if i == 0 {
			g.process = id
		}
	}
	initNet := nsID{dev: g.process.dev, ino: initNetIno}
	if _, dup := g.forbidden[initNet]; !dup {
		g.forbidden[initNet] = "the machine (init_net)"
	}
	return g, nil
}

// CheckPath returns an error wrapping ErrHostNamespace if the namespace file
// at path (/run/netns/NAME, /proc/PID/ns/net) is a forbidden namespace.
func (g *HostGuard) CheckPath(path string) error {
	id, err := statNS(path)
	if err != nil {
		return err
	}
	return g.check(id, path)
}

// CheckFD is CheckPath for an open namespace file descriptor.
func (g *HostGuard) CheckFD(fd int) error {
	id, err := fstatNS(fd)
	if err != nil {
		return err
	}
	return g.check(id, fmt.Sprintf("fd %d", fd))
}

func (g *HostGuard) check(id nsID, what string) error {
	if who, bad := g.forbidden[id]; bad {
		return fmt.Errorf("%s is %s, the network namespace of %s: %w", what, id, who, ErrHostNamespace)
	}
	return nil
}

// isProcessNS reports whether id is the namespace this process runs in.
func (g *HostGuard) isProcessNS(id nsID) bool { return id == g.process }

func statNS(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, fmt.Errorf("stat namespace %s: %w", path, err)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}

func fstatNS(fd int) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nsID{}, fmt.Errorf("fstat namespace fd %d: %w", fd, err)
	}
	return nsID{dev: st.Dev, ino: st.Ino}, nil
}
