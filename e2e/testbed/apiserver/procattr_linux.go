package apiserver

import "syscall"

// sysProcAttr puts the child in its own process group, so that the whole
// group can be signalled, and has the kernel SIGKILL it when the thread that
// started it dies. Go never retires ordinary runtime threads, so in practice
// that is when the test binary exits, however it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
