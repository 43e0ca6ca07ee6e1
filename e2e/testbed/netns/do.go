package netns

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/vishvananda/netns"
)

// errGoexit is reported when the function given to Do calls runtime.Goexit
// (for example t.FailNow); the namespace is still restored.
var errGoexit = errors.New("function called runtime.Goexit (t.FailNow?) inside the namespace")

// Do runs fn on a dedicated OS thread that has entered the namespace ns, and
// returns fn's error. Sockets created by fn stay in ns after Do returns and
// can be used from any goroutine. fn must not start goroutines that expect to
// be in ns (new goroutines run on other threads) and must not call t.FailNow.
//
// The thread is returned to the scheduler only after the original namespace
// was restored; if restoring fails, the thread stays locked and the runtime
// destroys it when the goroutine exits.
func (t *Topology) Do(ns string, fn func() error) error {
	h, err := t.openMember(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := runIn(t.guard, h, fn); err != nil {
		return fmt.Errorf("in namespace %s: %w", ns, err)
	}
	return nil
}

// runIn runs fn inside target on a new goroutine locked to its thread.
func runIn(g *HostGuard, target netns.NsHandle, fn func() error) error {
	if err := g.CheckFD(int(target)); err != nil {
		return err
	}
	res := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No deferred UnlockOSThread: switchAndRun unlocks only after a
		// verified restore.
		err := errGoexit
		defer func() { res <- err }()
		err = switchAndRun(g, target, fn)
	}()
	return <-res
}

// switchAndRun must be called on a locked thread. It leaves the thread locked
// whenever the thread may not be in the process's namespace.
func switchAndRun(g *HostGuard, target netns.NsHandle, fn func() error) (err error) {
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("get current namespace: %w", err)
	}
	defer orig.Close()
	id, err := fstatNS(int(orig))
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	if !g.isProcessNS(id) {
		// A thread outside the process namespace must never be reused: keep it
		// locked so it dies with this goroutine.
		return fmt.Errorf("thread is in %s, not in the process namespace; refusing", id)
	}
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread() // setns failed: the thread did not move
		return fmt.Errorf("enter namespace: %w", err)
	}
	defer func() {
		if rerr := netns.Set(orig); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restore namespace (thread discarded): %w", rerr))
			return
		}
		runtime.UnlockOSThread()
	}()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic inside namespace: %v\n%s", p, debug.Stack())
		}
	}()
	return fn()
}

// DoPath is Do for a network namespace the topology did not create but
// that lives inside it, such as a container's (/proc/PID/ns/net of a pod
// on a kubelet node). The host guard still refuses the machine's own.
func (t *Topology) DoPath(path string, fn func() error) error {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer h.Close()
	if err := runIn(t.guard, h, fn); err != nil {
		return fmt.Errorf("in namespace %s: %w", path, err)
	}
	return nil
}

// Guard is the host guard every entry point of the topology passes; other
// launchers (package launch) check their namespaces against it too.
func (t *Topology) Guard() *HostGuard { return t.guard }
