package ctl_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestErrors: each failure is one line on stderr, nothing on stdout, and
// its exit code: 2 for usage, 1 for a failed call, 2 for
// a failed diff.
func TestErrors(t *testing.T) {
	c, _ := newFleet(t)
	addr, _ := serveFleet(t, c)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := []string{"--server", addr, "--insecure"}
	explain := func(args ...string) []string { return append(append(slices.Clone(plain), "explain"), args...) }
	tests := []failure{
		{"no command", nil, 2, `^switchyardctl: no command \(see switchyardctl --help\)$`},
		{"unknown command", []string{"bogus"}, 2, `^switchyardctl: unknown command "bogus"`},
		{"unknown global flag", []string{"--nope", "status"}, 2, `^switchyardctl: flag provided but not defined: -nope`},
		{"unknown command flag", append(slices.Clone(plain), "status", "--desired"), 2,
			`^switchyardctl status: flag provided but not defined: -desired \(see switchyardctl status --help\)$`},
		{"extra argument", append(slices.Clone(plain), "status", "node-a"), 2, `want no arguments, got 1`},
		{"missing argument", append(slices.Clone(plain), "view"), 2, `^switchyardctl view: want NODE, got 0 argument\(s\)`},
		{"no CA and not insecure", []string{"status"}, 2, `--ca-file is required \(plaintext only with --insecure\)`},
		{"insecure with TLS files", []string{"--insecure", "--ca-file", "ca.crt", "status"}, 2, `--insecure cannot be combined`},
		{"certificate without key", []string{"--ca-file", "ca.crt", "--cert-file", "a.crt", "status"}, 2, `--cert-file and --key-file go together`},
		{"token in plaintext", []string{"--insecure", "--token", "t", "status"}, 2, `a bearer token needs TLS`},
		{"token twice", []string{"--ca-file", "ca.crt", "--token", "t", "--token-file", "f", "status"}, 2, `--token and --token-file exclude each other`},
		{"two problems, one line", []string{"--insecure", "--token", "t", "--timeout", "0s", "status"}, 2, `needs TLS.*; --timeout 0s: must be positive`},
		{"bad output", append(slices.Clone(plain), "-o", "yaml", "status"), 2, `-o "yaml": want table or json`},
		{"bad protocol", explain("node-a", "icmp", "10.0.0.1", "10.96.0.10:80"), 2, `PROTO "icmp": want tcp, udp or sctp`},
		{"bad source", explain("node-a", "tcp", "pod", "10.96.0.10:80"), 2, `SRC "pod": want an IP address, or address:port`},
		{"no port", explain("node-a", "tcp", "10.0.0.1", "10.96.0.10"), 2, `DST:PORT "10.96.0.10": want address:port`},
		{"IPv6 without brackets", explain("node-a", "tcp", "fd00::1", "fd00::10:80"), 2, `DST:PORT "fd00::10:80"`},
		{"port 0", explain("node-a", "tcp", "10.0.0.1", "10.96.0.10:0"), 2, `port "0": want 1-65535`},
		{"port too high", explain("node-a", "tcp", "10.0.0.1", "10.96.0.10:70000"), 2, `port "70000": want 1-65535`},
		{"dry-run mode", explain("--mode", "dry-run", "node-a", "tcp", "10.0.0.1", "10.96.0.10:80"), 2, `--mode "dry-run"`},
		{"server refuses the packet", explain("node-a", "tcp", "fd00::1", "10.96.0.10:80"), 1, `^switchyardctl explain: Explain: InvalidArgument: `},
		{"unknown node", explain("node-z", "tcp", "10.0.0.1", "10.96.0.10:80"), 1, `^switchyardctl explain: Explain: NotFound: node "node-z" has no view$`},
		{"view of an unknown node", append(slices.Clone(plain), "view", "node-z"), 1, `^switchyardctl view: GetNodeView: NotFound: `},
		{"diff of an unknown node", append(slices.Clone(plain), "diff", "node-z"), 2, `^switchyardctl diff: node "node-z" is unknown to the control plane`},
		{"CA file missing", []string{"--ca-file", filepath.Join(dir, "nope"), "status"}, 1, `^switchyardctl status: --ca-file: open `},
		{"CA file not PEM", []string{"--ca-file", empty, "status"}, 1, `--ca-file .*: no PEM certificate`},
		{"nobody listens", []string{"--server", "unix://" + filepath.Join(dir, "none.sock"), "--insecure", "--timeout", "2s", "status"}, 1,
			`^switchyardctl status: ListNodes: Unavailable: `},
	}
	checkFailures(t, tests)
}

// TestHelp: every command's --help (and help COMMAND) documents every
// flag it takes, on stdout, with exit 0.
func TestHelp(t *testing.T) {
	global := []string{"server", "insecure", "ca-file", "cert-file", "key-file", "server-name", "token", "token-file", "o", "output", "timeout"}
	tests := []helpCase{
		{[]string{"--help"}, append(slices.Clone(global), "status", "explain", "view", "diff", "rollout", "Exit codes")},
		{[]string{"help"}, global},
		{[]string{"status", "--help"}, global},
		{[]string{"--insecure", "explain", "-h"}, append(slices.Clone(global), "desired", "mode", "NODE PROTO SRC DST:PORT")},
		{[]string{"help", "explain"}, append(slices.Clone(global), "desired", "mode")},
		{[]string{"view", "--help"}, append(slices.Clone(global), "view [flags] NODE")},
		{[]string{"diff", "--help"}, append(slices.Clone(global), "diff [flags] NODE", "1 when they differ")},
		{[]string{"rollout", "--help"}, append(slices.Clone(global), "GetRollout", "Exits 3 when the rollout halted")},
	}
	checkHelp(t, tests, func(w string) bool { return slices.Contains(global, w) || w == "desired" || w == "mode" })
}
