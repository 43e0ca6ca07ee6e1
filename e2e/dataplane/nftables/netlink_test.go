package nftables

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// nsNetlink opens google/nftables connections whose socket is created on
// a thread inside ns (Topology.Do): the socket stays in ns.
func nsNetlink(topo *netns.Topology, ns string) nftables.NetlinkDialer {
	return func(opts ...gnft.ConnOption) (*gnft.Conn, error) {
		var c *gnft.Conn
		err := topo.Do(ns, func() (err error) {
			c, err = gnft.New(append(opts, gnft.AsLasting())...)
			return err
		})
		return c, err
	}
}

// kernelView is the kernel's table three ways, each normalised for what
// legitimately differs between two tables with the same content (rule
// handles, chain creation order, hash order of map elements):
//   - the "nft list table" text, per chain and per set or map;
//   - "nft --debug=netlink list table": the expressions as the kernel
//     dumps them (registers, offsets, flags, element key bytes);
//   - google/nftables' decoding of the kernel's rule dump, which keeps
//     the exact length of every data attribute.
type kernelView struct {
	List  map[string]string
	Debug map[string]string
	Exprs map[string][][]expr.Any
}

var handleLine = regexp.MustCompile(`^(ip6? switchyard \S+)(?: \d+)*$`)

func (b *bed) kernelView(t *testing.T) kernelView {
	t.Helper()
	v := kernelView{List: blocksOf(b.listTable(t)), Debug: map[string]string{}, Exprs: map[string][][]expr.Any{}}
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "--debug=netlink", "list", "table", "ip", nftables.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "table ") {
			break // the ordinary listing follows the dump
		}
		if m := handleLine.FindStringSubmatch(l); m != nil {
			cur = m[1]
			v.Debug[cur] += "--\n" // one per rule; sets have one
			continue
		}
		if strings.TrimSpace(l) != "" && cur != "" {
			v.Debug[cur] += l + "\n"
		}
	}
	for k, s := range v.Debug {
		if strings.Contains(k, "@") { // set elements: hash order
			lines := strings.Split(strings.TrimSpace(s), "\n")
			slices.Sort(lines)
			v.Debug[k] = strings.Join(lines, "\n")
		}
	}
	c := nsNetlink(b.Topo, b.Node.NS)
	conn, err := c()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.CloseLasting() }()
	tbl := &gnft.Table{Name: nftables.DefaultTable, Family: gnft.TableFamilyIPv4}
	chains, err := conn.ListChainsOfTableFamily(gnft.TableFamilyIPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chains {
		rules, err := conn.GetRules(tbl, ch)
		if err != nil {
			t.Fatalf("rules of %s: %v", ch.Name, err)
		}
		v.Exprs[ch.Name] = [][]expr.Any{}
		for _, r := range rules {
			v.Exprs[ch.Name] = append(v.Exprs[ch.Name], r.Exprs)
		}
	}
	return v
}

// blocksOf cuts an "nft list table" into "chain X", "map X", "set X" →
// body; set and map elements are sorted.
func blocksOf(listing string) map[string]string {
	out := map[string]string{}
	cur := ""
	for _, l := range strings.Split(listing, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "chain ") || strings.HasPrefix(l, "map ") || strings.HasPrefix(l, "set "):
			cur = strings.TrimSuffix(l, " {")
			out[cur] = ""
		case l == "}" && !strings.HasSuffix(out[cur], "{\n"):
			cur = ""
		case cur != "":
			out[cur] += l + "\n"
		}
	}
	for k, body := range out {
		if strings.HasPrefix(k, "chain ") {
			continue
		}
		head, elems, ok := strings.Cut(body, "elements = {")
		if !ok {
			continue
		}
		var items []string
		for _, it := range strings.Split(strings.NewReplacer("\n", " ", "}", "").Replace(elems), ",") {
			if it = strings.Join(strings.Fields(it), " "); it != "" {
				items = append(items, it)
			}
		}
		slices.Sort(items)
		out[k] = head + "elements = " + strings.Join(items, ", ")
	}
	return out
}

func twoPort(sv *switchyardv1.ServiceView) *switchyardv1.ServiceView {
	sv.Type = switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP
	sv.Ports[0].NodePort = 0
	return sv
}

// noLocal: endpoints exist in the cluster, none usable here (drop).
func noLocal(sv *switchyardv1.ServiceView) *switchyardv1.ServiceView {
	sv.HasAnyEndpoints = true
	return sv
}

// TestNetlinkPartialMatchesNft applies state A with nft, moves to B (and
// back to A) with partial syncs sent over netlink, and checks that the
// kernel holds exactly what a fresh nft-only apply of the same state
// creates, and that traffic follows the new rules.
func TestNetlinkPartialMatchesNft(t *testing.T) {
	b := newBed(t)
	b.dp = b.newDP(t, nftables.Config{PartialNetlink: nsNetlink(b.Topo, b.Node.NS)})
	p := b.Pods
	stateA := dptest.State(b.Node,
		dptest.Service("web", vip.Addr().String(), 80, 30080, p[0], p[1]),
		dptest.Service("gone", "10.96.0.11", 80, 30081, p[2]),
		twoPort(dptest.Service("empty", "10.96.0.12", 80, 0)),
	)
	stateB := dptest.State(b.Node,
		dptest.Service("web", vip.Addr().String(), 80, 30080, p...), // endpoint added
		twoPort(dptest.Service("empty", "10.96.0.12", 80, 0, p[0])), // gets an endpoint
		dptest.Service("fresh", "10.96.0.13", 8080, 30083, p[1], p[2]),
		twoPort(dptest.Service("nothing", "10.96.0.14", 53, 0)),            // reject element
		noLocal(twoPort(dptest.Service("elsewhere", "10.96.0.15", 80, 0))), // drop element
	)
	// An affinity service whose cluster IP changes: its chain (with the
	// affinity lookups) is rewritten, its sets stay.
	sticky := func(ip string) *switchyardv1.ServiceView {
		sv := twoPort(dptest.Service("web", ip, 80, 0, p...))
		sv.SessionAffinity = switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP
		sv.SessionAffinityTimeoutSeconds = 600
		return sv
	}
	stateC := dptest.State(b.Node, sticky("10.96.0.20"))
	stateD := dptest.State(b.Node, sticky(vip.Addr().String()))
	fresh := func(st *dataplane.State) kernelView {
		if err := b.dp.Cleanup(t.Context()); err != nil {
			t.Fatal(err)
		}
		dp := b.newDP(t, nftables.Config{})
		if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		return b.kernelView(t)
	}
	for _, step := range []struct {
		name     string
		from, to *dataplane.State
	}{{"A to B", stateA, stateB}, {"B to A", stateB, stateA}, {"affinity C to D", stateC, stateD},
		{"affinity turned on, A to D", stateA, stateD}} {
		t.Run(step.name, func(t *testing.T) {
			// Start from an empty table: a full resync over an existing
			// table flushes and refills the interval set cluster-cidrs,
			// which leaves a different (equivalent) interval layout in
			// the kernel than a fresh load; that is nft's doing, not the
			// partial sync's.
			if err := b.dp.Cleanup(t.Context()); err != nil {
				t.Fatal(err)
			}
			b.dp = b.newDP(t, nftables.Config{PartialNetlink: nsNetlink(b.Topo, b.Node.NS)})
			b.apply(t, step.from) // full, nft
			if s := b.dp.LastSync(); !s.Full || s.Netlink != 0 {
				t.Fatalf("first sync: %+v", s)
			}
			b.apply(t, step.to)
			if s := b.dp.LastSync(); s.Full || s.Netlink != 1 || s.NetlinkFallbacks != 0 || s.Operations < 10 {
				t.Fatalf("partial sync did not go over netlink: %+v", s)
			}
			t.Logf("partial over netlink: %+v", b.dp.LastSync())
			// Before any traffic: packets fill the affinity sets.
			got := b.kernelView(t)
			// Affinity: sequential, since connections racing before the
			// first one is recorded may land anywhere (as in kube-proxy).
			par := 8
			if step.to.Services["default/web"].SessionAffinity == switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP {
				par = 1
			}
			res, err := probe.New(b.Topo, b.Topo.Client().NS).TCP(t.Context(), vip, probe.Options{Count: 150, Parallel: par})
			if err != nil {
				t.Fatal(err)
			}
			if web := step.to.Services["default/web"]; web.SessionAffinity == switchyardv1.SessionAffinity_SESSION_AFFINITY_CLIENT_IP {
				if len(res.Failures) > 0 || len(res.Counts) != 1 {
					t.Fatalf("affinity: want one backend, got %v, failures %v", res.Counts, res.Failures)
				}
			} else {
				dptest.CheckShares(t, res, len(web.ClusterEndpoints))
			}
			want := fresh(step.to)
			if d := cmp.Diff(want.List, got.List); d != "" {
				t.Errorf("nft list table differs (-nft only +netlink partial):\n%s", d)
			}
			if d := cmp.Diff(want.Debug, got.Debug); d != "" {
				t.Errorf("kernel expressions differ (-nft only +netlink partial):\n%s", d)
			}
			if d := cmp.Diff(want.Exprs, got.Exprs); d != "" {
				t.Errorf("decoded kernel rules differ (-nft only +netlink partial):\n%s", d)
			}
			if len(got.Exprs) < 10 || len(got.Debug) < 10 {
				t.Fatalf("listing too small: %d chains, %d debug blocks", len(got.Exprs), len(got.Debug))
			}
		})
	}
}

// TestNetlinkFallsBackToNft: a change the translator does not know (new
// affinity sets) runs through nft, in the same Apply, and works.
func TestNetlinkFallsBackToNft(t *testing.T) {
	b := newBed(t)
	b.dp = b.newDP(t, nftables.Config{PartialNetlink: nsNetlink(b.Topo, b.Node.NS)})
	sv := dptest.Service("lb", vip.Addr().String(), 80, 30080, b.Pods...)
	b.apply(t, dptest.State(b.Node, sv))
	b.Runner.Take(nftInputs)
	// loadBalancerSourceRanges need prefix matches, which the netlink
	// translator does not know: the whole transaction runs through nft.
	sv2 := proto.Clone(sv).(*switchyardv1.ServiceView)
	sv2.Type = switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER
	sv2.LoadBalancerIps = []string{"192.0.2.10"}
	sv2.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	b.apply(t, dptest.State(b.Node, sv2))
	if s := b.dp.LastSync(); s.Netlink != 0 || s.NetlinkFallbacks != 1 || s.Transactions != 1 {
		t.Fatalf("want one nft fallback: %+v", s)
	}
	if in := b.Runner.Take(nftInputs); len(in) != 1 || !strings.Contains(in[0], "198.51.100.0/24") {
		t.Fatalf("want one nft -f with the source range, got %d", len(in))
	}
	res, err := probe.New(b.Topo, b.Topo.Client().NS).TCP(t.Context(), vip, probe.Options{Count: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 || len(res.Counts) != len(b.Pods) {
		t.Fatalf("want every backend, got %v, failures %v", res.Counts, res.Failures)
	}
}

// TestNetlinkLargePartial: a partial sync that adds a thousand services
// at once (15,000 operations, 5,000 hairpin pairs in one set) goes over
// netlink: the batch outgrows the socket's default buffers and a 64 KiB
// attribute, so it is sent with forced buffers and elements are split
// into messages of at most 500.
func TestNetlinkLargePartial(t *testing.T) {
	b := newBed(t)
	b.dp = b.newDP(t, nftables.Config{PartialNetlink: nsNetlink(b.Topo, b.Node.NS)})
	one := dptest.BenchState(1, false)
	b.apply(t, one)
	b.apply(t, dptest.BenchState(1000, false))
	if s := b.dp.LastSync(); s.Full || s.Netlink != 1 || s.NetlinkFallbacks != 0 || s.Operations < 10000 {
		t.Fatalf("partial sync of 999 new services did not go over netlink: %+v", s)
	}
	out, err := b.Topo.Exec(t.Context(), b.Node.NS, "nft", "list", "map", "ip", nftables.DefaultTable, "service-ips")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), ". tcp . 80 : goto"); n != 1000 {
		t.Fatalf("service-ips holds %d services, want 1000", n)
	}
}
