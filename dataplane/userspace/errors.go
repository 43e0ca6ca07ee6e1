package userspace

import (
	"errors"
	"syscall"
)

func isResourceErr(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func isAddrNotAvail(err error) bool { return errors.Is(err, syscall.EADDRNOTAVAIL) }

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
