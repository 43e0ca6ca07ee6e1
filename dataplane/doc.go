// Package dataplane is the root of Switchyard's dataplane module: one
// package per kernel mode (iptables, ipvs, nftables, userspace) behind one
// interface, each with its kernel access behind a small seam and a fake.
//
// The modes land with their own issues; this package only anchors the module.
package dataplane
