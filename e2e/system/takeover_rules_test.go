package system_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// saveBinaries are every iptables back end and family a proxy may have
// programmed on a node: kube-proxy uses the machine's `iptables`
// (iptables-nft here), the agent's iptables mode detects one, and
// kube-proxy's dual-stack start programs IPv6 too.
var saveBinaries = []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"}

// kubeletChains are kubelet's chains. kube-proxy's iptables mode keeps a
// copy of KUBE-FIREWALL (its anti-martian rule, "identical to kubelet's",
// proxier.go) that no one can tell from kubelet's, so it stays on a node
// kube-proxy leaves, rightly: kubelet's protection of route_localnet.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-MARK-DROP", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

// ruleSnapshot is what node-0 holds of either proxy: every iptables line
// naming a KUBE- chain (declarations without their counters, rules), as
// "<save binary> <table> <line>", sorted, those naming one of kubelet's
// chains apart; and the nftables tables.
type ruleSnapshot struct {
	lines, kubelet []string
	tables         []string
}

// isKubelet reports whether an iptables-save line declares, appends to or
// jumps to one of kubelet's chains.
func isKubelet(line string) bool {
	for f := range strings.FieldsSeq(line) {
		if slices.Contains(kubeletChains, strings.TrimPrefix(f, ":")) {
			return true
		}
	}
	return false
}

// snapshot reads node-0's rules back, inside its namespace.
func (b *takeoverBed) snapshot(t *testing.T) ruleSnapshot {
	t.Helper()
	ctx := t.Context()
	var s ruleSnapshot
	for _, bin := range saveBinaries {
		out, err := b.e.c.Topo.Exec(ctx, b.node.NS, bin)
		if err != nil {
			t.Fatalf("%s in %s: %v", bin, b.node.Name, err)
		}
		table := ""
		for line := range strings.SplitSeq(string(out), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.Contains(line, "KUBE-"):
				if i := strings.LastIndex(line, " ["); strings.HasPrefix(line, ":") && i > 0 {
					line = line[:i] // ":KUBE-SERVICES - [0:0]": the counters change
				}
				if isKubelet(line) {
					s.kubelet = append(s.kubelet, bin+" "+table+" "+line)
					continue
				}
				s.lines = append(s.lines, bin+" "+table+" "+line)
			}
		}
	}
	out, err := b.e.c.Topo.Exec(ctx, b.node.NS, "nft", "list", "tables")
	if err != nil {
		t.Fatalf("nft list tables in %s: %v", b.node.Name, err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			s.tables = append(s.tables, line)
		}
	}
	slices.Sort(s.lines)
	slices.Sort(s.tables)
	return s
}

// proxyTables are the nftables tables of kube-proxy ("kube-proxy") and
// of the agent's nftables mode ("switchyard"); the others are
// iptables-nft's own (nat, filter, mangle).
func (s ruleSnapshot) proxyTables() []string {
	var out []string
	for _, tb := range s.tables {
		if strings.HasSuffix(tb, " kube-proxy") || strings.HasSuffix(tb, " switchyard") {
			out = append(out, tb)
		}
	}
	return out
}

// kubeProxy is kube-proxy's evidence: its canary chains (iptables mode)
// and its tables (nftables mode), which no Switchyard mode creates.
func (s ruleSnapshot) kubeProxy() []string { return s.owned(":KUBE-PROXY-CANARY", " kube-proxy") }

// switchyard is what only the agent creates: its iptables mode's shard
// chains and its nftables mode's tables.
func (s ruleSnapshot) switchyard() []string { return s.owned(" :KUBE-SHARD-", " switchyard") }

// owned lists the saved lines that hold chain and the tables named table.
func (s ruleSnapshot) owned(chain, table string) []string {
	var out []string
	for _, l := range s.lines {
		if strings.Contains(l, chain) {
			out = append(out, l)
		}
	}
	for _, tb := range s.tables {
		if strings.HasSuffix(tb, table) {
			out = append(out, "nft: "+tb)
		}
	}
	return out
}

// against returns what s holds beyond base (left by kube-proxy) and what
// of base it lacks, as multisets: a jump of kube-proxy's that is the
// same line as one of the agent's counts too.
func (s ruleSnapshot) against(base ruleSnapshot) (extra, missing []string) {
	count := map[string]int{}
	for _, l := range base.lines {
		count[l]++
	}
	for _, l := range s.lines {
		if count[l] > 0 {
			count[l]--
			continue
		}
		extra = append(extra, l)
	}
	for l, n := range count {
		for range n {
			missing = append(missing, l)
		}
	}
	have, had := s.proxyTables(), base.proxyTables()
	for _, tb := range have {
		if !slices.Contains(had, tb) {
			extra = append(extra, "nft: "+tb)
		}
	}
	for _, tb := range had {
		if !slices.Contains(have, tb) {
			missing = append(missing, "nft: "+tb)
		}
	}
	slices.Sort(missing)
	return extra, missing
}

// checkLeft fails t unless node-0 holds exactly what a clean install of
// the agent's mode holds: nothing of kube-proxy's beyond it, nothing of
// it missing.
func (b *takeoverBed) checkLeft(t *testing.T, mode string) {
	t.Helper()
	s := b.snapshot(t)
	extra, missing := s.against(b.baseline[mode])
	t.Logf("after the takeover: %s holds %d KUBE- lines (a clean install of the %s mode: %d), tables %q; kube-proxy's evidence %q; %d lines beyond the clean install, %d missing; kubelet's chains, kept: %q",
		b.node.Name, len(s.lines), mode, len(b.baseline[mode].lines), s.tables, s.kubeProxy(), len(extra), len(missing), s.kubelet)
	if len(extra) > 0 {
		t.Errorf("kube-proxy's leftovers on %s:\n%s", b.node.Name, strings.Join(extra, "\n"))
	}
	if len(missing) > 0 {
		t.Errorf("%s lacks what a clean install of the %s mode holds:\n%s", b.node.Name, mode, strings.Join(missing, "\n"))
	}
}

// report logs the takeover's phases with what failed in each, the
// load's totals and how long the takeover took.
func (b *takeoverBed) report(t *testing.T, ld *load, tl timeline, tt takeoverTimes, end time.Time) {
	t.Helper()
	ld.logPhases(t, tl, end)
	t.Logf("takeover: agent start → acked %s, agent start → kube-proxy's leftovers gone %s, kube-proxy stopped → gone %s",
		between(tt.agentStart, tt.acked), between(tt.agentStart, tt.clean), between(tt.kubeProxyStop, tt.clean))
}

// logPhases logs the load's phases (tl) with what failed in each, and
// its totals.
func (ld *load) logPhases(t *testing.T, tl timeline, end time.Time) {
	t.Helper()
	fails := ld.failures()
	for i, p := range tl {
		next := end
		if i+1 < len(tl) {
			next = tl[i+1].from
		}
		var in []string
		for _, f := range fails {
			if tl.of(f.at) == i {
				in = append(in, fmt.Sprintf("  +%v %s", f.at.Sub(ld.start).Round(time.Millisecond), f.what))
			}
		}
		t.Logf("phase %q: from +%v for %v, %d failures\n%s", p.name, p.from.Sub(ld.start).Round(time.Millisecond),
			next.Sub(p.from).Round(time.Millisecond), len(in), strings.Join(in, "\n"))
	}
	t.Logf("load over %v:\n%s", end.Sub(ld.start).Round(time.Millisecond), ld.summary())
}

// between is b-a, or "never" when either did not happen.
func between(a, b time.Time) string {
	if a.IsZero() || b.IsZero() {
		return "never"
	}
	return b.Sub(a).Round(time.Millisecond).String()
}

// agentLines are the agent's log lines about kube-proxy and the ports
// they share.
func agentLines(log string) []string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "kube-proxy") || strings.Contains(line, "kubeProxy") || strings.Contains(line, "address") {
			out = append(out, line)
		}
	}
	return out
}

// logTime is when the agent logged line (its "time=" field).
func logTime(line string) (time.Time, bool) {
	for f := range strings.FieldsSeq(line) {
		if v, ok := strings.CutPrefix(f, "time="); ok {
			at, err := time.Parse(time.RFC3339Nano, v)
			return at, err == nil
		}
	}
	return time.Time{}, false
}

// Messages of the agent (package syncer and kubeproxycleanup).
const (
	msgKubeProxyLive    = "handing the node to it"
	msgKubeProxyStays   = "kube-proxy's rules stay for now"
	msgKubeProxyRuns    = "kube-proxy is running on this node"
	msgKubeProxyGone    = "kube-proxy stopped: this agent takes the node over"
	msgKubeProxyFound   = "kube-proxy state found; removing it"
	msgKubeProxyRemoved = "kube-proxy state removed"
)

// checkLog fails t unless the agent's log (lines since its start) shows
// the takeover as the scenario has it: the node handed to a running
// kube-proxy, and taken back once it stopped (or neither), and
// kube-proxy's rules removed after it stopped.
func (b *takeoverBed) checkLog(t *testing.T, handsOver bool, lines []string, tt takeoverTimes) {
	t.Helper()
	has := func(msgs ...string) bool {
		return slices.ContainsFunc(lines, func(l string) bool {
			return !slices.ContainsFunc(msgs, func(m string) bool { return !strings.Contains(l, m) })
		})
	}
	if live, back := has(msgKubeProxyLive), has(msgKubeProxyGone); live != handsOver || back != handsOver {
		t.Errorf("agent log: node handed to kube-proxy %t and taken back %t, want %t", live, back, handsOver)
	}
	// Handing the node over, the agent never tries to remove the rules
	// of a kube-proxy that runs (package peer's ErrLive).
	if has(msgKubeProxyStays, msgKubeProxyRuns) {
		t.Errorf("agent log: the agent tried to remove kube-proxy's rules while it ran (%q)", msgKubeProxyRuns)
	}
	msgs := []string{msgKubeProxyFound, msgKubeProxyRemoved}
	if handsOver {
		msgs = append([]string{msgKubeProxyGone}, msgs...)
	}
	for _, msg := range msgs {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, msg) })
		if i < 0 {
			t.Errorf("agent log: no %q", msg)
			continue
		}
		at, ok := logTime(lines[i])
		switch {
		case !ok:
			t.Errorf("agent log: no time in %q", lines[i])
		case at.Before(tt.kubeProxyStop):
			t.Errorf("agent log: %q %v before kube-proxy stopped", msg, tt.kubeProxyStop.Sub(at))
		default:
			t.Logf("agent log: %q at agent start +%v, kube-proxy stop +%v", msg,
				at.Sub(tt.agentStart).Round(time.Millisecond), at.Sub(tt.kubeProxyStop).Round(time.Millisecond))
		}
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
