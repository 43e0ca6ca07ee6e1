// Package kubeproxycleanuptest provides Script, a scripted stand-in for the
// command.Runner kubeproxycleanup runs through: it answers each command
// line from a table and records every call with its stdin, so tests
// assert the exact commands and restore payloads.
package kubeproxycleanuptest

import (
	"context"
	"os/exec"
	"strings"
	"sync"
)

// Response is what a scripted command returns.
type Response struct {
	Out string
	Err error
}

// Call is one command the code under test ran.
type Call struct {
	Argv  string // space-joined
	Stdin string
}

// Script is a Runner. Commands missing from Responses fail as a missing
// binary would (exec.ErrNotFound), so a test lists exactly the tools and
// writes it expects.
type Script struct {
	Responses map[string]Response // key: argv joined by single spaces

	mu    sync.Mutex
	calls []Call
}

// Run implements command.Runner.
func (s *Script) Run(_ context.Context, argv []string, stdin []byte) ([]byte, error) {
	key := strings.Join(argv, " ")
	s.mu.Lock()
	s.calls = append(s.calls, Call{Argv: key, Stdin: string(stdin)})
	s.mu.Unlock()
	r, ok := s.Responses[key]
	if !ok {
		return nil, &exec.Error{Name: argv[0], Err: exec.ErrNotFound}
	}
	return []byte(r.Out), r.Err
}

// Calls returns every call so far, in order.
func (s *Script) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Writes returns the calls that change state: everything but the
// read-only survey commands (*-save, list, show, ipvsadm -L).
func (s *Script) Writes() []Call {
	var out []Call
	for _, c := range s.Calls() {
		if !isRead(c.Argv) {
			out = append(out, c)
		}
	}
	return out
}

func isRead(argv string) bool {
	f := strings.Fields(argv)
	return strings.HasSuffix(f[0], "-save") || argv == "nft list tables" || (f[0] == "ipset" && len(f) > 1 && f[1] == "list") ||
		argv == "ipvsadm -L -n" || (f[0] == "ip" && len(f) > 2 && f[2] == "addr")
}
