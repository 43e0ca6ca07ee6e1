package conntrack_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
)

var nsSeq atomic.Int64

// kernelTable creates a fresh network namespace (deleted at cleanup) and
// returns a conntrack.Netlink on a handle opened inside it. It skips
// without root or ip(8); the host namespace is never touched.
func kernelTable(tb testing.TB) conntrack.Netlink {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to create a network namespace")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skipf("needs ip: %v", err)
	}
	name := fmt.Sprintf("swyd-ct-%d-%d", os.Getpid(), nsSeq.Add(1))
	host := command.ExecRunner{}
	if _, err := host.Run(context.Background(), []string{"ip", "netns", "add", name}, nil); err != nil {
		tb.Fatalf("create namespace: %v", err)
	}
	ns, err := netns.GetFromName(name)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	ns.Close()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		h.Close()
		if _, err := host.Run(context.Background(), []string{"ip", "netns", "del", name}, nil); err != nil {
			tb.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return conntrack.Netlink{Handle: h}
}

// create inserts an entry as the kernel would hold it: the original
// tuple src→dst and the reply tuple from reply back to src.
func create(tb testing.TB, ct conntrack.Netlink, proto uint8, e conntrack.Entry) {
	tb.Helper()
	fam := netlink.InetFamily(unix.AF_INET)
	if e.Dst.Addr().Is6() {
		fam = unix.AF_INET6
	}
	f := &netlink.ConntrackFlow{
		FamilyType: uint8(fam),
		Forward: netlink.IPTuple{Protocol: proto, SrcIP: net.IP(e.Src.Addr().AsSlice()), DstIP: net.IP(e.Dst.Addr().AsSlice()),
			SrcPort: e.Src.Port(), DstPort: e.Dst.Port()},
		Reverse: netlink.IPTuple{Protocol: proto, SrcIP: net.IP(e.Reply.Addr().AsSlice()), DstIP: net.IP(e.Src.Addr().AsSlice()),
			SrcPort: e.Reply.Port(), DstPort: e.Src.Port()},
		TimeOut: 300,
	}
	if proto == unix.IPPROTO_TCP {
		f.ProtoInfo = &netlink.ProtoInfoTCP{State: 3} // ESTABLISHED
	}
	if err := ct.Handle.ConntrackCreate(netlink.ConntrackTable, fam, f); err != nil {
		tb.Fatalf("create %v: %v", e, err)
	}
}

// TestNetlinkTable lists and deletes real conntrack entries in a fresh
// namespace: UDP only, both families, exactly the entries asked for.
func TestNetlinkTable(t *testing.T) {
	ct := kernelTable(t)
	stale := conntrack.Entry{Src: ap("10.0.0.9:40000"), Dst: ap("10.96.0.10:53"), Reply: ap("10.244.1.1:53")}
	kept := conntrack.Entry{Src: ap("10.0.0.9:40001"), Dst: ap("10.96.0.10:53"), Reply: ap("10.244.0.1:53")}
	sameTupleOtherPort := conntrack.Entry{Src: ap("10.0.0.9:40002"), Dst: ap("10.96.0.10:53"), Reply: ap("10.244.1.1:54")}
	tcp := conntrack.Entry{Src: ap("10.0.0.9:40003"), Dst: ap("10.96.0.10:53"), Reply: ap("10.244.1.1:53")}
	v6 := conntrack.Entry{Src: ap("[fd00::9]:40000"), Dst: ap("[fd00:96::10]:53"), Reply: ap("[fd00:244::1]:53")}
	for _, e := range []conntrack.Entry{stale, kept, sameTupleOtherPort, v6} {
		create(t, ct, unix.IPPROTO_UDP, e)
	}
	create(t, ct, unix.IPPROTO_TCP, tcp)

	got, err := ct.ListUDP(t.Context(), dataplane.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	if want := []conntrack.Entry{stale, kept, sameTupleOtherPort}; !sameEntries(got, want) {
		t.Fatalf("ListUDP(IPv4) = %v, want %v (no TCP)", got, want)
	}
	// sameTupleOtherPort differs from the deleted one by its reply
	// source port only: it stays.
	n, err := ct.DeleteEntries(t.Context(), dataplane.IPv4, []conntrack.Entry{stale,
		{Src: sameTupleOtherPort.Src, Dst: sameTupleOtherPort.Dst, Reply: ap("10.244.1.1:53")}})
	if err != nil || n != 1 {
		t.Fatalf("DeleteEntries = %d, %v; want 1 deleted", n, err)
	}
	got, err = ct.ListUDP(t.Context(), dataplane.IPv4)
	if err != nil {
		t.Fatal(err)
	}
	if want := []conntrack.Entry{kept, sameTupleOtherPort}; !sameEntries(got, want) {
		t.Errorf("after delete, ListUDP(IPv4) = %v, want %v", got, want)
	}
	if got, err := ct.ListUDP(t.Context(), dataplane.IPv6); err != nil || !sameEntries(got, []conntrack.Entry{v6}) {
		t.Errorf("ListUDP(IPv6) = %v, %v; want %v", got, err, v6)
	}
}

func sameEntries(a, b []conntrack.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[conntrack.Entry]int{}
	for _, e := range a {
		seen[e]++
	}
	for _, e := range b {
		seen[e]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

// BenchmarkReconcile100k is one reconcile (list, judge, delete) of a
// table of 100k UDP entries in a fresh namespace, against 1,000 live
// UDP ports of 5 endpoints each. staleEvery entries in 100 are stale
// (DNATed to an endpoint that is gone), so each iteration deletes that
// many and re-creates them afterwards (outside the timer).
//
//	sudo go test ./conntrack/ -run '^$' -bench Reconcile100k -benchtime 5x
func BenchmarkReconcile100k(b *testing.B) {
	for _, staleEvery := range []int{0, 1} {
		b.Run(fmt.Sprintf("stale=%d%%", staleEvery), func(b *testing.B) { benchReconcile(b, 100_000, staleEvery) })
	}
}

func benchReconcile(b *testing.B, n, stalePct int) {
	ct := kernelTable(b)
	const ports, eps = 1000, 5
	live := conntrack.Live{ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}}
	vip := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), 53)
	}
	ep := func(i, j int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), uint16(5000+j))
	}
	for i := range ports {
		u := conntrack.UDPPort{Dsts: []netip.AddrPort{vip(i)}}
		for j := range eps {
			u.AddEndpoint(ep(i, j))
		}
		live.Ports = append(live.Ports, u)
	}
	var stale []conntrack.Entry
	start := time.Now()
	for k := range n {
		i := k % ports
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(k >> 16), byte(k >> 8)}), uint16(1024+k%256))
		e := conntrack.Entry{Src: src, Dst: vip(i), Reply: ep(i, k%eps)}
		if stalePct > 0 && k%100 < stalePct {
			e.Reply = ep(i, eps) // an endpoint the port no longer has
			stale = append(stale, e)
		}
		create(b, ct, unix.IPPROTO_UDP, e)
	}
	b.Logf("created %d entries in %v", n, time.Since(start).Round(time.Millisecond))
	b.ResetTimer()
	for range b.N {
		res, err := conntrack.ReconcileTable(b.Context(), ct, dataplane.IPv4, func() conntrack.Live { return live })
		if err != nil {
			b.Fatal(err)
		}
		if res.Listed != n || res.Deleted != len(stale) {
			b.Fatalf("listed %d deleted %d, want %d and %d", res.Listed, res.Deleted, n, len(stale))
		}
		b.StopTimer()
		for _, e := range stale {
			create(b, ct, unix.IPPROTO_UDP, e)
		}
		b.StartTimer()
	}
}
