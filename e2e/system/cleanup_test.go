package system_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// Other software's state on a node, which an uninstall must leave.
const (
	foreignIPTables = "*nat\n:DOCKER - [0:0]\n-A PREROUTING -m comment --comment foreign -j DOCKER\n-A DOCKER -d 172.17.0.2/32 -p tcp -j DNAT --to-destination 172.17.0.2:80\nCOMMIT\n" +
		"*filter\n-A INPUT -p tcp -m tcp --dport 2222 -m comment --comment foreign -j ACCEPT\nCOMMIT\n"
	foreignNFT = "table inet foreign {\n\tchain input {\n\t\ttype filter hook input priority 0; policy accept;\n\t\ttcp dport 2222 accept\n\t}\n}\n"
)

// TestCleanupFlag is the uninstall of README "Uninstalling": node-0's agent
// runs iptables, node-1's nftables; the agents stop (the DaemonSet is
// deleted: their rules stay and keep forwarding), then `switchyard-agent
// --cleanup --state-dir <dir>` runs once in each node's namespace. It
// exits 0, nothing of any mode is left (every iptables back end and
// family, ipsets, nftables tables; IPVS is absent on this kernel and
// reported so), the persisted state is gone, other software's rules
// stay, the Service no longer answers; a second run finds nothing and
// exits 0; a run that cannot finish exits 1 and says why.
func TestCleanupFlag(t *testing.T) {
	e := &env{c: startCluster(t, system.Config{Nodes: 2, Pods: 2})}
	ctx := t.Context()
	client := e.c.Topo.Client().NS
	if err := e.c.KillAgent(1); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartAgentAs(1, "nftables"); err != nil {
		t.Fatal(err)
	}
	modeOf := map[int]string{0: "iptables", 1: "nftables"}
	for i, n := range e.c.Topo.Nodes() {
		waitFor(ctx, t, n.Name+" runs "+modeOf[i]+" alone", func() (bool, string) {
			ipt, err1 := e.leftovers(ctx, n, "iptables")
			nft, err2 := e.leftovers(ctx, n, "nftables")
			if modeOf[i] == "iptables" {
				return err1 == nil && err2 == nil && len(ipt) > 0 && len(nft) == 0, fmt.Sprint(len(ipt), len(nft), err1, err2)
			}
			return err1 == nil && err2 == nil && len(ipt) == 0 && len(nft) > 0, fmt.Sprint(len(ipt), len(nft), err1, err2)
		})
		if _, err := e.c.Topo.ExecInput(ctx, n.NS, strings.NewReader(foreignIPTables), "iptables-nft-restore", "--noflush"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Topo.ExecInput(ctx, n.NS, strings.NewReader(foreignNFT), "nft", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Topo.Exec(ctx, n.NS, "ipset", "create", "foreign-set", "hash:ip"); err != nil {
			t.Fatal(err)
		}
	}
	e.settled(t, "before-uninstall")
	for i := range e.c.Topo.Nodes() {
		if err := e.c.KillAgent(i); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range e.c.Topo.Nodes() {
		res, err := e.tcp(ctx, n.NS, e.c.VIP(), 8)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("agents stopped, %s → %s: %d/%d connections (the rules stay)", n.Name, e.c.VIP(), res.Succeeded(), res.Attempts)
	}

	for i, n := range e.c.Topo.Nodes() {
		start := time.Now()
		out, err := e.c.RunAgentCleanup(ctx, i)
		t.Logf("%s: switchyard-agent --cleanup in %v, exit %d:\n%s", n.Name, time.Since(start).Round(time.Millisecond), exitCode(err), out)
		if err != nil {
			t.Fatalf("--cleanup on %s: %v", n.Name, err)
		}
		for _, want := range []string{"iptables: clean", "nftables: clean", "ipvs: nothing to remove", "file(s) removed from " + e.c.AgentStateDir(i), "cleanup complete"} {
			if !bytes.Contains(out, []byte(want)) {
				t.Errorf("%s: --cleanup output lacks %q", n.Name, want)
			}
		}
		checkUninstalled(t, e, n)
		if entries, _ := os.ReadDir(e.c.AgentStateDir(i)); len(entries) != 0 {
			t.Errorf("%s: state left in %s: %v", n.Name, e.c.AgentStateDir(i), entries)
		}
	}
	res, err := probe.New(e.c.Topo, client).TCP(ctx, e.c.VIP(), probe.Options{Count: 8, Parallel: 8, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after --cleanup, client → %s: %d attempted, %d failed (%v)", e.c.VIP(), res.Attempts, len(res.Failures), res.Reasons())
	if !allFailed(res) {
		t.Errorf("the Service still answers after --cleanup: %v", res)
	}

	// Again: nothing to do, still exit 0.
	if out, err := e.c.RunAgentCleanup(ctx, 0); err != nil || !bytes.Contains(out, []byte("state: 0 file(s) removed")) {
		t.Errorf("second --cleanup: %v\n%s", err, out)
	}
	// A state directory it cannot empty: exit 1, and the reason.
	blocked := filepath.Join(e.c.AgentStateDir(0), "view.pb")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := e.c.RunAgentCleanup(ctx, 0)
	t.Logf("--cleanup with %s a non-empty directory: exit %d\n%s", blocked, netns.ExitCode(err), out)
	if netns.ExitCode(err) != 1 || !bytes.Contains(out, []byte("state: FAILED")) || !bytes.Contains(out, []byte("cleanup incomplete (rerun to retry)")) {
		t.Errorf("--cleanup that cannot finish: exit %d (want 1), %v", netns.ExitCode(err), err)
	}
}

// exitCode is a command's exit status: 0 for no error.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	return netns.ExitCode(err)
}

// checkUninstalled fails t unless nothing of Switchyard and all of the
// foreign state is on n.
func checkUninstalled(t *testing.T, e *env, n netns.Node) {
	t.Helper()
	ctx := t.Context()
	left := 0
	for _, mode := range []string{"iptables", "nftables"} {
		l, err := e.leftovers(ctx, n, mode)
		if err != nil {
			t.Fatal(err)
		}
		left += len(l)
		if len(l) > 0 {
			t.Errorf("%s: %s left after --cleanup:\n%s", n.Name, mode, strings.Join(l, "\n"))
		}
	}
	t.Logf("%s: %d Switchyard rules, chains, sets or tables left", n.Name, left)
	for _, c := range []struct {
		argv []string
		want []string
	}{
		{[]string{"iptables-nft-save"}, []string{":DOCKER", "-A PREROUTING -m comment --comment foreign -j DOCKER", "--dport 2222 -m comment --comment foreign -j ACCEPT"}},
		{[]string{"nft", "list", "table", "inet", "foreign"}, []string{"tcp dport 2222 accept"}},
		{[]string{"ipset", "list", "-n"}, []string{"foreign-set"}},
	} {
		out, err := e.c.Topo.Exec(ctx, n.NS, c.argv...)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !bytes.Contains(out, []byte(w)) {
				t.Errorf("%s: foreign %q gone (%s):\n%s", n.Name, w, strings.Join(c.argv, " "), out)
			}
		}
	}
}
