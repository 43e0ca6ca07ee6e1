package netns

import (
	"errors"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

func TestHostGuardRefusesHostNamespaces(t *testing.T) {
	RequireRoot(t)
	g, err := NewHostGuard()
	if err != nil {
		t.Fatalf("NewHostGuard: %v", err)
	}
	for _, path := range []string{"/proc/self/ns/net", "/proc/thread-self/ns/net"} {
		if err := g.CheckPath(path); !IsHostNamespace(err) {
			t.Errorf("CheckPath(%s) = %v, want ErrHostNamespace", path, err)
		}
	}
	// Without CAP_SYS_PTRACE, PID 1's namespace cannot even be opened; that
	// is a refusal too.
	if err := g.CheckPath("/proc/1/ns/net"); err == nil {
		t.Error("CheckPath(/proc/1/ns/net) = nil, want a refusal")
	} else if !IsHostNamespace(err) {
		t.Logf("PID 1's namespace is unreadable here: %v", err)
	}
	initNet := nsID{dev: g.process.dev, ino: initNetIno}
	if err := g.check(initNet, "init_net"); !IsHostNamespace(err) {
		t.Errorf("check(init_net) = %v, want ErrHostNamespace", err)
	}
	h, err := netns.GetFromPath("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := g.CheckFD(int(h)); !IsHostNamespace(err) {
		t.Errorf("CheckFD(process namespace) = %v, want ErrHostNamespace", err)
	}
	ran := false
	if err := runIn(g, h, func() error { ran = true; return nil }); !IsHostNamespace(err) || ran {
		t.Errorf("runIn(process namespace) = %v (ran=%v), want ErrHostNamespace and fn not run", err, ran)
	}
}

// TestTopologyRefusesHostNamespace smuggles the host namespace into a
// topology under a member name and checks that every entry point refuses it
// without running anything.
func TestTopologyRefusesHostNamespace(t *testing.T) {
	topo := New(t, Spec{})
	if err := topo.guard.CheckPath(nsPath(topo.Node(0).NS)); err != nil {
		t.Fatalf("guard refuses the topology's own node namespace: %v", err)
	}
	const hostPath = "/proc/self/ns/net" // this test runs in the machine's namespace
	hostID, err := statNS(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	const alias = "host-alias"
	topo.mu.Lock()
	topo.members[alias] = member{path: hostPath, id: hostID}
	topo.mu.Unlock()
	t.Cleanup(func() {
		topo.mu.Lock()
		delete(topo.members, alias)
		topo.mu.Unlock()
	})
	ctx := t.Context()
	ran := false
	checks := map[string]error{
		"Exec":       func() error { _, err := topo.Exec(ctx, alias, "true"); return err }(),
		"ExecInput":  func() error { _, err := topo.ExecInput(ctx, alias, strings.NewReader(""), "true"); return err }(),
		"Do":         topo.Do(alias, func() error { ran = true; return nil }),
		"Start":      func() error { _, err := topo.Start(ctx, alias, Cmd{Argv: []string{"true"}}); return err }(),
		"SetSysctls": topo.SetSysctls(alias, Sysctl{"net.ipv4.ip_forward", "1"}),
		"ReadSysctl": func() error { _, err := topo.ReadSysctl(alias, "net.ipv4.ip_forward"); return err }(),
	}
	for name, err := range checks {
		if !IsHostNamespace(err) {
			t.Errorf("%s(host alias) = %v, want ErrHostNamespace", name, err)
		}
	}
	if ran {
		t.Error("Do ran its function in the host namespace")
	}
	if _, err := topo.Exec(ctx, "sy-not-ours", "true"); !errors.Is(err, ErrUnknownNamespace) {
		t.Errorf("Exec(unknown) = %v, want ErrUnknownNamespace", err)
	}
}
