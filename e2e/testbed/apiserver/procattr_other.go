//go:build !linux

package apiserver

import "syscall"

// sysProcAttr: only Linux has Pdeathsig; Available refuses other systems.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
