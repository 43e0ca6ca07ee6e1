package system_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// ipvsProc is the kernel's table of virtual and real servers, per network
// namespace: it exists once the ip_vs module is loaded.
const ipvsProc = "/proc/net/ip_vs"

// TestScenariosIPVS runs the whole scenario table with the ipvs mode,
// chosen by the control plane's NodeConfig (--mode ipvs) while every
// agent starts with --mode iptables, as TestScenariosNFTables does for
// nftables. Rows that read or break the kernel's rules do it the ipvs
// way; a row that cannot apply to the mode skips saying why
// (notApplicable).
//
// The machines this project runs on have no IPVS: there it skips, and
// `make ipvs-scenarios` (e2e/dataplane/ipvs, TestSystemScenariosInGuest)
// runs it inside the QEMU guest, API server, control plane, agents,
// namespaces and traffic all in the guest's kernel.
func TestScenariosIPVS(t *testing.T) {
	requireIPVS(t)
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 4, Mode: modeIPVS}), mode: modeIPVS}
	for _, n := range e.c.Topo.Nodes() {
		waitFor(t.Context(), t, n.Name+" programs the cluster's Service in IPVS", func() (bool, string) {
			lines, err := e.ipvsState(t.Context(), n, e.c.VIP().Addr())
			return err == nil && len(lines) > 0, fmt.Sprint(lines, err)
		})
		if out, err := e.c.Topo.Exec(t.Context(), n.NS, "iptables-save", "-t", "nat"); err != nil || strings.Contains(string(out), "KUBE-SERVICES") {
			t.Fatalf("%s: iptables mode's rules in ipvs mode: %v\n%s", n.Name, err, out)
		}
	}
	runScenarios(t, e, false)
}

// requireIPVS skips the test where the kernel has no IPVS. It never loads
// the module itself: that would change the machine's kernel, not a
// namespace of the test's. Not even CI makes this a failure: on a machine
// without IPVS the guest is where this test runs.
func requireIPVS(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ipvsProc); errors.Is(err, fs.ErrNotExist) {
		t.Skipf("this kernel has no IPVS (%s missing); the ipvs scenarios run inside a QEMU guest with Debian's kernel: "+
			"make ipvs-scenarios", ipvsProc)
	} else if err != nil {
		t.Fatal(err)
	}
}

// notApplicable skips a scenario (or a case of one) that cannot apply to
// the mode the agents run, saying why.
func notApplicable(t *testing.T, why string) {
	t.Helper()
	t.Skip("not applicable: " + why)
}

// ipvsState returns what node n's kernel holds of address addr in the
// ipvs mode: its virtual servers (the lines of /proc/net/ip_vs, which
// writes addresses in hex) and its binding to a link (kube-ipvs0).
func (e *env) ipvsState(ctx context.Context, n netns.Node, addr netip.Addr) ([]string, error) {
	out, err := e.c.Topo.Exec(ctx, n.NS, "cat", ipvsProc)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w\n%s", ipvsProc, err, out)
	}
	a4 := addr.As4()
	hex := fmt.Sprintf("%02X%02X%02X%02X:", a4[0], a4[1], a4[2], a4[3])
	var lines []string
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[1], hex) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	out, err = e.c.Topo.Exec(ctx, n.NS, "ip", "-o", "addr", "show", "to", addr.String()+"/32")
	if err != nil {
		return nil, fmt.Errorf("ip addr show to %s: %w\n%s", addr, err, out)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if line != "" {
			lines = append(lines, strings.Join(strings.Fields(line), " "))
		}
	}
	return lines, nil
}

// serviceLeft returns what node n's kernel still holds of Service s:
// rules naming its namespace (iptables, nftables) or, in the ipvs mode,
// which names no Service, what it holds for its cluster IP (ipvsState).
func (e *env) serviceLeft(ctx context.Context, n netns.Node, s *svc) ([]string, error) {
	if e.mode == modeIPVS {
		return e.ipvsState(ctx, n, s.vip(0).Addr())
	}
	return e.rulesFor(ctx, n, s.Namespace)
}
