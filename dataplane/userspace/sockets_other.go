//go:build !linux

package userspace

import "syscall"

// socketControl does nothing off Linux: there is no IP_FREEBIND, so only
// local addresses can be bound (Config.LocalAddress gives the fallback).
func socketControl(bool) func(network, address string, c syscall.RawConn) error { return nil }
