package userspace

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// fakeClock is a settable clock for affinity tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

var (
	bA = netip.MustParseAddrPort("10.0.0.1:80")
	bB = netip.MustParseAddrPort("10.0.0.2:80")
	bC = netip.MustParseAddrPort("10.0.0.3:80")
	c1 = netip.MustParseAddr("192.0.2.1")
	c2 = netip.MustParseAddr("192.0.2.2")
)

// step is one operation on a balancer and, for picks, the expected order.
type step struct {
	advance time.Duration
	pick    netip.Addr
	want    []netip.AddrPort
	used    netip.AddrPort // recorded after the pick, when valid
	failed  netip.AddrPort // recorded after the pick, when valid
	update  []netip.AddrPort
}

func TestBalancer(t *testing.T) {
	abc := []netip.AddrPort{bA, bB, bC}
	for _, tc := range []struct {
		name     string
		affinity time.Duration
		steps    []step
	}{
		{
			name: "round robin, retry order follows the rotation",
			steps: []step{
				{pick: c1, want: []netip.AddrPort{bA, bB, bC}},
				{pick: c1, want: []netip.AddrPort{bB, bC, bA}},
				{pick: c2, want: []netip.AddrPort{bC, bA, bB}},
				{pick: c1, want: []netip.AddrPort{bA, bB, bC}},
			},
		},
		{
			name: "update keeps the position modulo the new length",
			steps: []step{
				{pick: c1, want: []netip.AddrPort{bA, bB, bC}},
				{pick: c1, want: []netip.AddrPort{bB, bC, bA}},
				{update: []netip.AddrPort{bA, bB}},
				{pick: c1, want: []netip.AddrPort{bA, bB}},
				{update: nil},
				{pick: c1, want: nil},
			},
		},
		{
			name:     "affinity sticks to the backend used, expires after idle timeout",
			affinity: 10 * time.Second,
			steps: []step{
				{pick: c1, want: []netip.AddrPort{bA, bB, bC}, used: bA},
				{advance: 9 * time.Second, pick: c1, want: []netip.AddrPort{bA, bB, bC}, used: bA},
				{pick: c2, want: []netip.AddrPort{bB, bC, bA}, used: bB},
				// 9 s after its last use, c1 still sticks: the timeout
				// runs from the last use.
				{advance: 9 * time.Second, pick: c1, want: []netip.AddrPort{bA, bB, bC}},
				{advance: 10 * time.Second, pick: c1, want: []netip.AddrPort{bC, bA, bB}},
			},
		},
		{
			name:     "affinity follows a retry and drops a failed or removed backend",
			affinity: time.Hour,
			steps: []step{
				{pick: c1, want: []netip.AddrPort{bA, bB, bC}, failed: bA, used: bB},
				{pick: c1, want: []netip.AddrPort{bB, bC, bA}, failed: bB},
				{pick: c1, want: []netip.AddrPort{bB, bC, bA}, used: bC},
				{update: []netip.AddrPort{bA, bB}},
				{pick: c1, want: []netip.AddrPort{bA, bB}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1000, 0)}
			b := newBalancer(clk.now, abc, tc.affinity, hashing{})
			for i, s := range tc.steps {
				clk.advance(s.advance)
				if s.update != nil || (s.pick == netip.Addr{}) {
					b.update(s.update, tc.affinity, hashing{})
					continue
				}
				got := b.pick(netip.AddrPortFrom(s.pick, 40000))
				if diff := cmp.Diff(s.want, got, cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })); diff != "" {
					t.Fatalf("step %d: pick(%s) (-want +got):\n%s", i, s.pick, diff)
				}
				if s.failed.IsValid() {
					b.failed(s.pick, s.failed)
				}
				if s.used.IsValid() {
					b.used(s.pick, s.used)
				}
			}
		})
	}
}

func TestBalancerExactShares(t *testing.T) {
	b := newBalancer(time.Now, []netip.AddrPort{bA, bB, bC}, 0, hashing{})
	counts := map[netip.AddrPort]int{}
	for range 300 {
		counts[b.pick(netip.AddrPortFrom(c1, 40000))[0]]++
	}
	if diff := cmp.Diff(map[netip.AddrPort]int{bA: 100, bB: 100, bC: 100}, counts,
		cmp.Comparer(func(x, y netip.AddrPort) bool { return x == y })); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
}

func TestBalancerSweepBoundsTable(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	b := newBalancer(clk.now, []netip.AddrPort{bA, bB}, 5*time.Second, hashing{})
	for i := range 100 {
		c := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		b.used(c, b.pick(netip.AddrPortFrom(c, 40000))[0])
	}
	clk.advance(6 * time.Second)
	b.pick(netip.AddrPortFrom(c1, 40000))
	b.mu.Lock()
	n := len(b.sticky)
	b.mu.Unlock()
	if n != 1 {
		t.Errorf("%d affinity entries after 100 expired and one new, want 1", n)
	}
}

// TestBalancerHashed: with a maglev table the first choice is the
// table's backend for the client's address and port, the same at every
// pick (no rotation), and the retries follow it in rotation order; with
// source-hash every port of a client gets one backend.
func TestBalancerHashed(t *testing.T) {
	backends := []netip.AddrPort{bA, bB, bC}
	tab := &serviceport.Table{Seed: 7, Slots: []uint16{2, 0, 1, 1, 0, 2, 0, 1, 2, 2, 1}}
	for _, alg := range []serviceport.Algorithm{serviceport.Maglev, serviceport.SourceHash} {
		b := newBalancer(time.Now, backends, 0, hashing{alg: alg, table: tab})
		firsts := map[netip.AddrPort]bool{}
		for port := range uint16(200) {
			client := netip.AddrPortFrom(c1, 30000+port)
			want := backends[tab.Pick(alg, client)]
			for range 2 {
				order := b.pick(client)
				if order[0] != want || len(order) != 3 {
					t.Fatalf("%s: pick(%s) = %v, want %s first, then the others", alg, client, order, want)
				}
			}
			firsts[want] = true
		}
		if wantN := map[serviceport.Algorithm]int{serviceport.Maglev: 3, serviceport.SourceHash: 1}[alg]; len(firsts) != wantN {
			t.Errorf("%s: 200 ports of one client reached %d backends, want %d", alg, len(firsts), wantN)
		}
	}
}
