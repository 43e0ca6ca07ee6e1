// Package iptablestest provides Fake, an in-memory stand-in for the
// iptables-restore, iptables-save and ipset binaries behind
// command.Runner.
//
// Fake keeps one set of tables per binary family (iptables, ip6tables) and
// applies restore input the way the kernel does: a table block is atomic
// at COMMIT, jumps must target existing chains, a referenced chain cannot be
// deleted, and without --noflush the tables in the input are flushed first.
// Dump prints the state in iptables-save syntax with chains sorted, so tests
// can compare it with cmp.Diff. Fail injects errors.
//
// It also keeps ipsets, one namespace-wide list as in the kernel, in an
// ipsettest.Fake that runs its ipset commands (save, list -n, restore and
// the single commands, members checked in ipset's spelling); this Fake
// adds what ties sets to rules: destroy refused while a rule matches the
// set, and (with CheckSetRefs) restores refused when a rule matches a
// set that does not exist.
package iptablestest
