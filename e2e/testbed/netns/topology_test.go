package netns_test

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

func TestMain(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}

// hostState is what the machine's namespace looks like, read-only: nft (never
// iptables) ruleset, links, routes of both families and forwarding.
type hostState struct {
	Ruleset, Links, Routes, Routes6, IPForward, IPv6Forwarding string
}

func captureHost(t *testing.T) hostState {
	t.Helper()
	run := func(argv ...string) string {
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			t.Fatalf("host %v: %v", argv, err)
		}
		return string(out)
	}
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return hostState{
		Ruleset:        run("nft", "list", "ruleset"),
		Links:          run("ip", "-o", "link"),
		Routes:         run("ip", "route"),
		Routes6:        run("ip", "-6", "route"),
		IPForward:      read("/proc/sys/net/ipv4/ip_forward"),
		IPv6Forwarding: read("/proc/sys/net/ipv6/conf/all/forwarding"),
	}
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install -y iptables nftables): %v", tool, err)
		}
	}
}

// listNetns returns the names in `ip netns list`.
func listNetns(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	names := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 0 {
			names[f[0]] = true
		}
	}
	return names
}

// checkHostUntouchedAfter registers a cleanup, to run after the topology's
// own teardown, that compares the host with before and checks that none of
// the topology's namespaces is left.
func checkHostUntouchedAfter(t *testing.T, before hostState, topo **netns.Topology) {
	t.Cleanup(func() {
		if diff := cmp.Diff(before, captureHost(t)); diff != "" {
			t.Errorf("host namespace changed (-before +after):\n%s", diff)
		}
		if *topo == nil {
			return
		}
		left := listNetns(t)
		for _, ns := range (*topo).Namespaces() {
			if left[ns] {
				t.Errorf("namespace %s still in `ip netns list` after teardown", ns)
			}
		}
	})
}

func mustExec(t *testing.T, topo *netns.Topology, ns string, argv ...string) string {
	t.Helper()
	out, err := topo.Exec(t.Context(), ns, argv...)
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	return string(out)
}

// wantOnly checks that every attempt succeeded and was answered by backend.
func wantOnly(t *testing.T, res probe.Result, backend string, n int, client netip.Addr) {
	t.Helper()
	if len(res.Failures) > 0 {
		t.Errorf("failures: %s", res)
	}
	if diff := cmp.Diff(map[string]int{backend: n}, res.Counts); diff != "" {
		t.Errorf("backends (-want +got):\n%s\n%s", diff, res)
	}
	if diff := cmp.Diff(map[string]int{client.String(): n}, res.Clients); diff != "" {
		t.Errorf("client address seen by %s (-want +got):\n%s", backend, diff)
	}
}

// smokeSetup builds 2 nodes with 3 pods running echo servers on 8080 and
// programs one DNAT (OUTPUT and PREROUTING) in node 0 from vip to pod-2.
func smokeSetup(t *testing.T) (topo *netns.Topology, target netns.Pod, vip netip.AddrPort, before hostState) {
	before = captureHost(t)
	checkHostUntouchedAfter(t, before, &topo)
	start := time.Now()
	topo = netns.New(t, netns.Spec{Nodes: 2, Pods: 3})
	t.Logf("topology %s: 2 nodes, 3 pods, %d namespaces, setup %v",
		topo.ID(), len(topo.Namespaces()), time.Since(start).Round(time.Millisecond))
	start = time.Now()
	cfg := echo.Config{TCP: ":8080", UDP: ":8080", ReportClient: true}
	if _, err := echo.StartPods(t.Context(), echo.Launcher{Topo: topo}, topo.Pods(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 echo servers ready in %v", time.Since(start).Round(time.Millisecond))

	node0 := topo.Node(0)
	target = node0.Pods[1] // pod-2, on node 0
	vip = netip.AddrPortFrom(netip.MustParseAddr("10.96.0.10"), 80)
	if v := mustExec(t, topo, node0.NS, "iptables", "--version"); !strings.Contains(v, "nf_tables") {
		t.Fatalf("iptables in the node is not the nft backend: %q", v)
	}
	for _, chain := range []string{"OUTPUT", "PREROUTING"} {
		mustExec(t, topo, node0.NS, "iptables", "-t", "nat", "-A", chain,
			"-d", vip.Addr().String()+"/32", "-p", "tcp", "--dport", "80",
			"-j", "DNAT", "--to-destination", target.IP.String()+":8080")
	}
	return topo, target, vip, before
}

func TestTopologySmoke(t *testing.T) {
	netns.RequireRoot(t)
	requireTools(t, "iptables", "nft")
	topo, target, vip, before := smokeSetup(t)
	ctx := t.Context()
	node0, node1 := topo.Node(0), topo.Node(1)
	const n = 20
	opts := probe.Options{Count: n}

	t.Run("node0 OUTPUT DNAT", func(t *testing.T) {
		res, err := probe.New(topo, node0.NS).TCP(ctx, vip, opts)
		if err != nil {
			t.Fatal(err)
		}
		wantOnly(t, res, target.Name, n, node0.IP)
	})
	t.Run("client via node0 PREROUTING DNAT", func(t *testing.T) {
		res, err := probe.New(topo, topo.Client().NS).TCP(ctx, vip, opts)
		if err != nil {
			t.Fatal(err)
		}
		wantOnly(t, res, target.Name, n, topo.Client().IP)
	})
	t.Run("pod to pod across nodes", func(t *testing.T) {
		pods := topo.Pods()
		for _, pair := range [][2]netns.Pod{{pods[0], pods[1]}, {pods[1], pods[2]}} {
			from, to := pair[0], pair[1]
			dst := netip.AddrPortFrom(to.IP, 8080)
			tcp, err := probe.New(topo, from.NS).TCP(ctx, dst, opts)
			if err != nil {
				t.Fatal(err)
			}
			wantOnly(t, tcp, to.Name, n, from.IP)
			udp, err := probe.New(topo, from.NS).UDP(ctx, dst, opts)
			if err != nil {
				t.Fatal(err)
			}
			wantOnly(t, udp, to.Name, n, from.IP)
		}
	})
	t.Run("node to control plane", func(t *testing.T) {
		ctl := topo.Control()
		l := echo.Launcher{Topo: topo}
		if _, err := l.Start(ctx, ctl.NS, echo.Config{Name: "control", TCP: ":9090", ReportClient: true}); err != nil {
			t.Fatal(err)
		}
		res, err := probe.New(topo, node1.NS).TCP(ctx, netip.AddrPortFrom(ctl.IP, 9090), opts)
		if err != nil {
			t.Fatal(err)
		}
		wantOnly(t, res, "control", n, node1.IP)
	})
	t.Run("pod on node0 to VIP, reply bridged (bridge-nf-call-iptables)", func(t *testing.T) {
		from := node0.Pods[0]
		res, err := probe.New(topo, from.NS).TCP(ctx, vip, opts)
		if err != nil {
			t.Fatal(err)
		}
		wantOnly(t, res, target.Name, n, from.IP)
	})
	t.Run("hairpin: pod reaches itself through the VIP", func(t *testing.T) {
		mustExec(t, topo, node0.NS, "iptables", "-t", "nat", "-A", "POSTROUTING",
			"-s", target.IP.String()+"/32", "-d", target.IP.String()+"/32", "-j", "MASQUERADE")
		res, err := probe.New(topo, target.NS).TCP(ctx, vip, opts)
		if err != nil {
			t.Fatal(err)
		}
		wantOnly(t, res, target.Name, n, node0.PodGateway)
	})
	t.Run("rules stay in node0", func(t *testing.T) {
		if out := mustExec(t, topo, node1.NS, "iptables", "-t", "nat", "-S"); strings.Contains(out, "DNAT") {
			t.Errorf("node1 has a DNAT rule:\n%s", out)
		}
		if diff := cmp.Diff(before, captureHost(t)); diff != "" {
			t.Errorf("host namespace changed while the topology is up (-before +now):\n%s", diff)
		}
	})
}

func TestSysctlsAndExecInput(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 1, Pods: 1, RouteLocalnet: true})
	node := topo.Node(0)
	for _, tc := range []struct{ ns, key, want string }{
		{node.NS, "net.ipv4.ip_forward", "1"},
		{node.NS, "net.ipv4.conf.all.route_localnet", "1"},
		{node.NS, "net.bridge.bridge-nf-call-iptables", "1"},
		{topo.Network().NS, "net.bridge.bridge-nf-call-iptables", "0"},
		{topo.Client().NS, "net.ipv4.ip_forward", "0"},
	} {
		// Read through `ip netns exec` (a separate process), not Do, to check
		// that Do's writes really landed in the namespace.
		path := "/proc/sys/" + strings.ReplaceAll(tc.key, ".", "/")
		got := strings.TrimSpace(mustExec(t, topo, tc.ns, "cat", path))
		if got != tc.want {
			t.Errorf("%s in %s = %q, want %q", tc.key, tc.ns, got, tc.want)
		}
	}
	hairpin := mustExec(t, topo, node.NS, "cat", "/sys/class/net/"+node.Pods[0].NodePort+"/brport/hairpin_mode")
	if strings.TrimSpace(hairpin) != "1" {
		t.Errorf("hairpin_mode on %s = %q, want 1", node.Pods[0].NodePort, hairpin)
	}
	out, err := topo.ExecInput(t.Context(), node.NS, strings.NewReader("hello from stdin"), "cat")
	if err != nil || string(out) != "hello from stdin" {
		t.Errorf("ExecInput cat = %q, %v", out, err)
	}
	_, err = topo.Exec(t.Context(), node.NS, "sh", "-c", "echo boom >&2; exit 3")
	if code := netns.ExitCode(err); code != 3 || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failing Exec: err=%v code=%d, want exit 3 with stderr", err, code)
	}
	hostFwd, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host ip_forward stays %s", strings.TrimSpace(string(hostFwd)))
}

// TestRoutesMatchPlan reads every planned route back with `ip route get`,
// on an IPv4-only and on a dual-stack plan.
func TestRoutesMatchPlan(t *testing.T) {
	for _, dual := range []bool{false, true} {
		t.Run(map[bool]string{false: "IPv4", true: "dual-stack"}[dual], func(t *testing.T) {
			routesMatchPlan(t, netns.New(t, netns.Spec{Nodes: 3, PodsPerNode: 1, DualStack: dual}))
		})
	}
}

func routesMatchPlan(t *testing.T, topo *netns.Topology) {
	p := topo.Plan()
	check := func(ns string, routes []netns.Route) {
		for _, r := range routes {
			dst := r.Dst.Addr().Next()
			if r.Dst.Bits() == 0 { // a default route: ::1 and 0.0.0.1 are special
				dst = netip.MustParseAddr(map[bool]string{false: "192.0.2.1", true: "2001:db8::1"}[dst.Is6()])
			}
			out := mustExec(t, topo, ns, "ip", "-o", "route", "get", dst.String())
			want := "dev " + r.Dev
			if r.Via.IsValid() {
				want = "via " + r.Via.String() + " " + want
			}
			if !strings.Contains(out, want) {
				t.Errorf("%s: route %s: ip route get says %q, want %q", ns, r, strings.TrimSpace(out), want)
			}
		}
	}
	for _, n := range p.Nodes {
		check(n.NS, n.Routes)
		for _, pod := range n.Pods {
			check(pod.NS, pod.Routes)
		}
	}
	check(p.Client.NS, p.Client.Routes)
	check(p.Control.NS, p.Control.Routes)
}

// TestDualStack builds a dual-stack topology and sends real traffic in
// each family: pod to pod across nodes (TCP and UDP, through the nodes'
// routes and forwarding), client to a pod on either node, node to control;
// every backend must see the sender's own address of that family.
func TestDualStack(t *testing.T) {
	netns.RequireRoot(t)
	var topo *netns.Topology
	checkHostUntouchedAfter(t, captureHost(t), &topo)
	topo = netns.New(t, netns.Spec{Nodes: 2, Pods: 3, DualStack: true})
	ctx := t.Context()
	cfg := echo.Config{TCP: ":8080", UDP: ":8080", ReportClient: true}
	if _, err := echo.StartPods(ctx, echo.Launcher{Topo: topo}, topo.Pods(), cfg); err != nil {
		t.Fatal(err)
	}
	ctl := topo.Control()
	if _, err := (echo.Launcher{Topo: topo}).Start(ctx, ctl.NS, echo.Config{Name: "control", TCP: ":9090", ReportClient: true}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"net.ipv6.conf.all.forwarding", "net.bridge.bridge-nf-call-ip6tables"} {
		if v, err := topo.ReadSysctl(topo.Node(0).NS, key); err != nil || v != "1" {
			t.Errorf("node-0 %s = %q, %v; want 1", key, v, err)
		}
	}
	const n = 10
	pods, client, node1 := topo.Pods(), topo.Client(), topo.Node(1)
	for _, fam := range []struct {
		name string
		pick func(ip, ip6 netip.Addr) netip.Addr
	}{
		{"IPv4", func(ip, _ netip.Addr) netip.Addr { return ip }},
		{"IPv6", func(_, ip6 netip.Addr) netip.Addr { return ip6 }},
	} {
		t.Run(fam.name, func(t *testing.T) {
			for _, pair := range [][2]netns.Pod{{pods[0], pods[1]}, {pods[1], pods[2]}} {
				from, to := pair[0], pair[1]
				dst := netip.AddrPortFrom(fam.pick(to.IP, to.IP6), 8080)
				src := fam.pick(from.IP, from.IP6)
				tcp, err := probe.New(topo, from.NS).TCP(ctx, dst, probe.Options{Count: n})
				if err != nil {
					t.Fatal(err)
				}
				wantOnly(t, tcp, to.Name, n, src)
				udp, err := probe.New(topo, from.NS).UDP(ctx, dst, probe.Options{Count: n})
				if err != nil {
					t.Fatal(err)
				}
				wantOnly(t, udp, to.Name, n, src)
			}
			for _, to := range pods[:2] { // pod-0 on node-0, pod-1 on node-1
				res, err := probe.New(topo, client.NS).TCP(ctx, netip.AddrPortFrom(fam.pick(to.IP, to.IP6), 8080), probe.Options{Count: n})
				if err != nil {
					t.Fatal(err)
				}
				wantOnly(t, res, to.Name, n, fam.pick(client.IP, client.IP6))
			}
			res, err := probe.New(topo, node1.NS).TCP(ctx, netip.AddrPortFrom(fam.pick(ctl.IP, ctl.IP6), 9090), probe.Options{Count: n})
			if err != nil {
				t.Fatal(err)
			}
			wantOnly(t, res, "control", n, fam.pick(node1.IP, node1.IP6))
		})
	}
}

// TestDoRestoresThreads hammers Do from many goroutines and then checks that
// every thread of this process is back in the process's namespace.
func TestDoRestoresThreads(t *testing.T) {
	topo := netns.New(t, netns.Spec{Nodes: 2, Pods: 2})
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	nss := topo.Namespaces()
	errs := make(chan error, 200)
	for i := range 200 {
		go func() {
			ns := nss[i%len(nss)]
			errs <- topo.Do(ns, func() error {
				got, err := os.Readlink("/proc/thread-self/ns/net")
				if err == nil && got == self {
					t.Errorf("inside Do(%s) the thread is still in the process namespace", ns)
				}
				return err
			})
		}()
	}
	for range 200 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		got, err := os.Readlink("/proc/self/task/" + task.Name() + "/ns/net")
		if err == nil && got != self {
			t.Errorf("thread %s is in %s, want %s", task.Name(), got, self)
		}
	}
}

// TestCloseKillsProcesses uses the non-testing constructor: Close must kill
// tracked processes and untracked ones (a backgrounded grandchild) before
// deleting the namespaces, which ip netns del alone would leave running.
func TestCloseKillsProcesses(t *testing.T) {
	netns.RequireRoot(t)
	ctx := t.Context()
	topo, err := netns.Create(ctx, netns.Spec{}, netns.Options{Logger: netns.TestLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = topo.Close(context.Background())
		}
	})
	pod := topo.Pods()[0]
	tracked, err := topo.Start(ctx, pod.NS, netns.Cmd{Argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := topo.Exec(ctx, pod.NS, "sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!")
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("orphan pid %q: %v", out, err)
	}
	if err := topo.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	select {
	case <-tracked.Done():
	default:
		t.Errorf("tracked pid %d still running after Close", tracked.Pid)
	}
	if state := procState(orphan); state != "" && state != "Z" {
		t.Errorf("untracked pid %d still alive (state %s) after Close", orphan, state)
	}
	left := listNetns(t)
	for _, ns := range topo.Namespaces() {
		if left[ns] {
			t.Errorf("namespace %s left after Close", ns)
		}
	}
	if _, err := topo.Exec(ctx, pod.NS, "true"); err == nil {
		t.Error("Exec after Close succeeded")
	}
}

// TestCreateFailureCleansUp makes one namespace name collide: Create must
// fail, remove everything it created, and leave the foreign namespace alone.
func TestCreateFailureCleansUp(t *testing.T) {
	netns.RequireRoot(t)
	id, err := netns.NewID()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := netns.NewPlan(netns.Spec{Nodes: 2, Pods: 2}, id)
	if err != nil {
		t.Fatal(err)
	}
	foreign := plan.Client.NS
	if out, err := exec.Command("ip", "netns", "add", foreign).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v %s", foreign, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", foreign).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v %s", foreign, err, out)
		}
	})
	_, err = netns.Create(t.Context(), netns.Spec{Nodes: 2, Pods: 2}, netns.Options{ID: id, Logger: netns.TestLogger(t)})
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("Create with a colliding name = %v, want 'already exists'", err)
	}
	left := listNetns(t)
	for _, ns := range plan.Namespaces() {
		if ns != foreign && left[ns] {
			t.Errorf("namespace %s left after failed Create", ns)
		}
	}
	if !left[foreign] {
		t.Errorf("failed Create deleted %s, which it did not create", foreign)
	}
}

// procState returns the state letter of pid, or "" when it does not exist.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return "?"
	}
	return s[i+2 : i+3]
}
