package launch

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// TestRunRefusesHostNamespace: a spec naming no namespace, or naming this
// process's own, never runs; neither does one with a namespace but no guard.
func TestRunRefusesHostNamespace(t *testing.T) {
	guard, err := netns.NewHostGuard()
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	argv := []string{"touch", marker}
	for _, tc := range []struct {
		name  string
		guard *netns.HostGuard
		spec  Spec
		host  bool // the error wraps netns.ErrHostNamespace
	}{
		{"no namespace", guard, Spec{Name: "t", Argv: argv}, true},
		{"own namespace", guard, Spec{Name: "t", Argv: argv, NetNS: "/proc/self/ns/net"}, true},
		{"own namespace by thread", guard, Spec{Name: "t", Argv: argv, NetNS: "/proc/thread-self/ns/net"}, true},
		{"namespace without guard", nil, Spec{Name: "t", Argv: argv, NetNS: "/proc/self/ns/net"}, false},
		{"loopback and namespace", guard, Spec{Name: "t", Argv: argv, NetNS: "/proc/self/ns/net", Loopback: true}, false},
		{"empty argv", guard, Spec{Name: "t", Loopback: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(t.Context(), tc.guard, tc.spec)
			if err == nil {
				t.Fatal("Run: no error")
			}
			if got := errors.Is(err, netns.ErrHostNamespace); got != tc.host {
				t.Errorf("Run: %v; wraps ErrHostNamespace = %v, want %v", err, got, tc.host)
			}
			if _, serr := Start(tc.guard, Spec{Name: tc.spec.Name, Argv: tc.spec.Argv, NetNS: tc.spec.NetNS,
				Loopback: tc.spec.Loopback, LogPath: filepath.Join(t.TempDir(), "log")}); serr == nil {
				t.Error("Start: no error")
			}
			if _, serr := Run(t.Context(), tc.guard, Spec{Argv: []string{"test", "-e", marker}, Loopback: true}); serr == nil {
				t.Fatalf("the refused command ran: %s exists", marker)
			}
		})
	}
}

// TestRunLoopback runs a short command in this namespace, with no guard.
func TestRunLoopback(t *testing.T) {
	log := filepath.Join(t.TempDir(), "echo.log")
	out, err := Run(t.Context(), nil, Spec{Name: "echo", Argv: []string{"echo", "hi"}, Loopback: true, LogPath: log})
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("Run = %q, %v; want hi", out, err)
	}
	p, err := Start(nil, Spec{Name: "true", Argv: []string{"true"}, Loopback: true, LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if tail := p.Tail(5); !strings.Contains(tail, "$ echo hi") {
		t.Errorf("log %q lacks the Run", tail)
	}
}

// TestRunInNamespace runs a short command in a fresh node namespace: it
// sees that namespace's links, not the machine's.
func TestRunInNamespace(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 1})
	ns := topo.Node(0).NS
	out, err := Run(t.Context(), topo.Guard(), Spec{Name: "ip link", Argv: []string{"ip", "-o", "link", "show"},
		NetNS: "/run/netns/" + ns})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "lo:") {
		t.Errorf("ip link in %s: %s", ns, out)
	}
	host, err := Run(t.Context(), nil, Spec{Name: "ip link", Argv: []string{"ip", "-o", "link", "show"}, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(host) == string(out) {
		t.Errorf("the node namespace lists the machine's links:\n%s", out)
	}
}
