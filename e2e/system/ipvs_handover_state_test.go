package system_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// ipvsLeft is what a node's kernel holds of IPVS, read back inside its
// namespace: virtual servers (`ipvsadm -Ln`), the connections their real
// servers count (active and inactive, IPVS's own table), the kube-ipvs0
// link, and the ipsets of Switchyard's ipvs mode (SWYD-IPVS-*) and of
// kube-proxy's (KUBE-*, but KUBE-SWYD-*: Switchyard's iptables mode's).
type ipvsLeft struct {
	virtualServers []string
	conns          int
	link           bool
	sets           []string
}

func (l ipvsLeft) empty() bool {
	return len(l.virtualServers) == 0 && l.conns == 0 && !l.link && len(l.sets) == 0
}

func (l ipvsLeft) String() string {
	if l.empty() {
		return "nothing"
	}
	var parts []string
	if n := len(l.virtualServers); n > 0 {
		parts = append(parts, fmt.Sprintf("%d virtual servers (%s…) carrying %d connections", n, l.virtualServers[0], l.conns))
	}
	if l.link {
		parts = append(parts, "kube-ipvs0")
	}
	if len(l.sets) > 0 {
		parts = append(parts, fmt.Sprintf("ipsets %q", l.sets))
	}
	return strings.Join(parts, ", ")
}

// readIPVS reads what node n holds of IPVS.
func (e *env) readIPVS(ctx context.Context, n netns.Node) (ipvsLeft, error) {
	var l ipvsLeft
	out, err := e.c.Topo.Exec(ctx, n.NS, "ipvsadm", "-Ln")
	if err != nil {
		return l, fmt.Errorf("ipvsadm -Ln: %w\n%s", err, out)
	}
	l.virtualServers, l.conns = parseIPVSList(string(out))
	// `ip link show` of a missing link fails; the listing of all does not.
	out, err = e.c.Topo.Exec(ctx, n.NS, "ip", "-o", "link", "show")
	if err != nil {
		return l, fmt.Errorf("ip link show: %w\n%s", err, out)
	}
	l.link = strings.Contains(string(out), " kube-ipvs0:")
	out, err = e.c.Topo.Exec(ctx, n.NS, "ipset", "list", "-n")
	if err != nil {
		return l, fmt.Errorf("ipset list -n: %w\n%s", err, out)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "SWYD-IPVS") ||
			strings.HasPrefix(line, "KUBE-") && !strings.HasPrefix(line, "KUBE-SWYD-") {
			l.sets = append(l.sets, line)
		}
	}
	return l, nil
}

// parseIPVSList returns the virtual servers of `ipvsadm -Ln` output
// ("TCP  10.96.5.20:80 rr") and the sum of their real servers' active
// and inactive connections ("  -> 10.244.0.2:8080  Masq  1  3  12").
func parseIPVSList(out string) (vss []string, conns int) {
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP" || f[0] == "FWM"):
			vss = append(vss, f[0]+" "+f[1])
		case len(f) >= 6 && f[0] == "->" && f[1] != "RemoteAddress:Port":
			a, _ := strconv.Atoi(f[4])
			i, _ := strconv.Atoi(f[5])
			conns += a + i
		}
	}
	return vss, conns
}

func TestParseIPVSList(t *testing.T) {
	out := `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.5.20:80 rr
  -> 10.244.0.2:8080              Masq    1      3          12
  -> 10.244.1.2:8080              Masq    1      0          1
UDP  10.96.5.20:53 rr
`
	vss, conns := parseIPVSList(out)
	if strings.Join(vss, ",") != "TCP 10.96.5.20:80,UDP 10.96.5.20:53" || conns != 16 {
		t.Errorf("parseIPVSList = %q, %d", vss, conns)
	}
}

// ipvsScheduled reads how many connections IPVS has scheduled on each
// virtual server of node n's namespace (`ipvsadm -Ln --stats --exact`,
// the Conns column), keyed "node protocol address:port": one that grows
// after a switch away from IPVS means new connections still met IPVS,
// and which virtual server says which traffic.
func (e *env) ipvsScheduled(ctx context.Context, n netns.Node) (map[string]uint64, error) {
	out, err := e.c.Topo.Exec(ctx, n.NS, "ipvsadm", "-Ln", "--stats", "--exact")
	if err != nil {
		return nil, fmt.Errorf("ipvsadm -Ln --stats --exact: %w\n%s", err, out)
	}
	got, err := parseIPVSStats(string(out))
	if err != nil {
		return nil, err
	}
	m := make(map[string]uint64, len(got))
	for vs, c := range got {
		m[n.Name+" "+vs] = c
	}
	return m, nil
}

// parseIPVSStats returns the Conns count of each virtual server in
// `ipvsadm -Ln --stats --exact` output.
func parseIPVSStats(out string) (map[string]uint64, error) {
	m := map[string]uint64{}
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[0] != "TCP" && f[0] != "UDP" && f[0] != "SCTP" && f[0] != "FWM") {
			continue
		}
		c, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ipvsadm --stats line %q: %w", line, err)
		}
		m[f[0]+" "+f[1]] = c
	}
	return m, nil
}

func TestParseIPVSStats(t *testing.T) {
	out := `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
  -> RemoteAddress:Port
TCP  10.96.5.20:80                    1234     5000     4000   300000   200000
  -> 10.244.0.2:8080                   600     2500     2000   150000   100000
UDP  10.96.5.20:53                       7        7        7      420      700
`
	m, err := parseIPVSStats(out)
	if err != nil || len(m) != 2 || m["TCP 10.96.5.20:80"] != 1234 || m["UDP 10.96.5.20:53"] != 7 {
		t.Errorf("parseIPVSStats = %v, %v", m, err)
	}
	if _, err := parseIPVSStats("TCP  10.96.5.20:80  12K 1 1 1 1\n"); err == nil {
		t.Error("parseIPVSStats took an abbreviated count")
	}
}

// tcpRetrans are the client namespace's TCP retransmission counters:
// SYNs sent again (no SYN-ACK within 1 s: dropped, or a stall that long)
// and segments sent again.
type tcpRetrans struct{ syn, segs uint64 }

func (r tcpRetrans) since(before tcpRetrans) tcpRetrans {
	return tcpRetrans{r.syn - before.syn, r.segs - before.segs}
}

func (r tcpRetrans) String() string {
	return fmt.Sprintf("%d SYN retransmissions, %d segments retransmitted", r.syn, r.segs)
}

// clientRetrans reads the client namespace's counters (/proc/net/netstat
// TcpExt TCPSynRetrans, /proc/net/snmp Tcp RetransSegs).
func (e *env) clientRetrans(t *testing.T) tcpRetrans {
	t.Helper()
	ns := e.c.Topo.Client().NS
	var r tcpRetrans
	for _, f := range []struct {
		file, proto, field string
		v                  *uint64
	}{{"/proc/net/netstat", "TcpExt:", "TCPSynRetrans", &r.syn}, {"/proc/net/snmp", "Tcp:", "RetransSegs", &r.segs}} {
		out, err := e.c.Topo.Exec(t.Context(), ns, "cat", f.file)
		if err != nil {
			t.Fatalf("read %s in the client: %v", f.file, err)
		}
		v, err := protoCounter(string(out), f.proto, f.field)
		if err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		*f.v = v
	}
	return r
}

// protoCounter finds field in /proc/net/{snmp,netstat} text: a header
// line and a value line, both starting with proto.
func protoCounter(text, proto, field string) (uint64, error) {
	var names []string
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == field && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
		return 0, fmt.Errorf("no %s %s", proto, field)
	}
	return 0, fmt.Errorf("no %s lines", proto)
}

func TestProtoCounter(t *testing.T) {
	text := "Tcp: RtoAlgorithm RetransSegs InErrs\nTcp: 1 42 0\nUdp: InDatagrams\nUdp: 7\n"
	if v, err := protoCounter(text, "Tcp:", "RetransSegs"); err != nil || v != 42 {
		t.Errorf("RetransSegs = %d, %v", v, err)
	}
	if _, err := protoCounter(text, "Tcp:", "Nope"); err == nil {
		t.Error("want an error for a missing field")
	}
}

// handOverRow is one transition's line in the results table.
type handOverRow struct {
	transition string
	// attempted and failed new connections, per target and in all.
	attempted, failed int
	perTarget         []string
	retrans           tcpRetrans
	long, broken      int
	// udpLate were answered after the next datagram was due, udpLost
	// never.
	udpSent, udpLate, udpLost int
	// ipvsNew is how many connections IPVS scheduled on the nodes once
	// every agent acked the new mode (leaving IPVS: want 0).
	ipvsNew  string
	switched time.Duration // settings written → every node acked the mode
	drain    string        // load stopped → nothing of IPVS left
	left     string        // what of IPVS was left at the end
}

// fill takes the load's counts.
func (r *handOverRow) fill(ld *load) {
	for _, s := range ld.streams {
		r.attempted += s.res.Attempts
		r.failed += len(s.res.Failures)
		r.perTarget = append(r.perTarget, fmt.Sprintf("%s %d/%d", s.name, len(s.res.Failures), s.res.Attempts))
	}
	r.long = len(ld.long)
	for _, c := range ld.long {
		if c.err != nil {
			r.broken++
		}
	}
	r.udpSent, r.udpLate, r.udpLost = ld.udp.sent, ld.udp.late, len(ld.udp.unanswered)
}

// logTable logs the rows as the Markdown table RELIABILITY.md keeps.
func logTable(t *testing.T, rows []handOverRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString("| transition | new connections failed / attempted (per target) | client TCP retransmissions | long-lived broken | UDP never answered (late) | IPVS connections scheduled after the switch | switch acked | drain (load stopped → no IPVS) | IPVS left |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d / %d (%s) | %d SYN, %d segments | %d / %d | %d / %d (%d) | %s | %v | %s | %s |\n", r.transition, r.failed, r.attempted,
			strings.Join(r.perTarget, ", "), r.retrans.syn, r.retrans.segs, r.broken, r.long, r.udpLost, r.udpSent, r.udpLate, r.ipvsNew,
			r.switched.Round(100*time.Millisecond), r.drain, r.left)
	}
	t.Logf("IPVS hand-over results:\n%s", b.String())
}
