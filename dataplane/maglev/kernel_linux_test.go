package maglev

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane/command"
)

// kernelProbe is one nftables rule whose jhash the kernel computes for
// every probe packet and stores, with the packet's source, in a dynamic
// set: `meta mark set jhash ... add @set { saddr [. sport] . meta mark }`.
type kernelProbe struct {
	set           string
	ip6, tcp      bool // family and the protocol whose sport is hashed
	flow          bool // saddr . sport, or saddr alone
	modulus, seed uint32
	offset        uint32
}

// kernelProbes cover both families, both protocols, a modulus that reads
// the raw hash back (reciprocal_scale by 2^32-1 is hash-1), table sizes,
// an offset, and the seeds 0 and 2^32-1.
var kernelProbes = []kernelProbe{
	{set: "flow4udp", flow: true, modulus: 0xffffffff, seed: 0x12345678},
	{set: "flow4tcp", tcp: true, flow: true, modulus: 1021, seed: 0xdeadbeef, offset: 1},
	{set: "addr4", modulus: 65521, seed: 0},
	{set: "flow6udp", ip6: true, flow: true, modulus: 0xffffffff, seed: 7},
	{set: "flow6tcp", ip6: true, tcp: true, flow: true, modulus: 4093, seed: 0xffffffff},
	{set: "addr6", ip6: true, modulus: 251, seed: 1, offset: 100},
}

const kernelTable = "maglev_test"

// kernelRules returns the nft script declaring the probes' sets and rules.
func kernelRules() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", kernelTable)
	var rules []string
	for _, p := range kernelProbes {
		nfproto, saddr, proto := "ipv4", "ip saddr", "udp"
		if p.ip6 {
			nfproto, saddr = "ipv6", "ip6 saddr"
		}
		if p.tcp {
			proto = "tcp"
		}
		key := saddr
		if p.flow {
			key += " . " + proto + " sport"
		}
		fmt.Fprintf(&b, "  set %s { typeof %s . meta mark; flags dynamic; size 65535; }\n", p.set, key)
		rules = append(rules, fmt.Sprintf(
			"    meta nfproto %s %s dport 9 meta mark set jhash %s mod %d seed %#x offset %d add @%s { %s . meta mark }\n",
			nfproto, proto, key, p.modulus, p.seed, p.offset, p.set, key))
	}
	b.WriteString("  chain out {\n    type filter hook output priority 0; policy accept;\n")
	b.WriteString(strings.Join(rules, ""))
	b.WriteString("  }\n}\n")
	return b.String()
}

type kernelTuple struct {
	addr netip.Addr
	port uint16
}

// kernelTuples returns n distinct source (address, port) pairs per family,
// addresses in 10.0.0.0/8 and fd00::/16, routed to lo in the namespace.
func kernelTuples(n int) (v4, v6 []kernelTuple) {
	src := splitmix64(7)
	port := func() uint16 { return uint16(1024 + src.next()%(65536-1024)) }
	seen := map[kernelTuple]bool{}
	for len(v4) < n {
		r := src.next()
		tu := kernelTuple{netip.AddrFrom4([4]byte{10, byte(r), byte(r >> 8), byte(1 + (r>>16)%254)}), port()}
		if !seen[tu] {
			seen[tu] = true
			v4 = append(v4, tu)
		}
	}
	for len(v6) < n {
		var a [16]byte
		a[0] = 0xfd
		binary.BigEndian.PutUint64(a[8:], src.next())
		binary.BigEndian.PutUint16(a[2:], uint16(src.next()))
		tu := kernelTuple{netip.AddrFrom16(a), port()}
		if !seen[tu] && tu.addr != netip.MustParseAddr("fd00::1") {
			seen[tu] = true
			v6 = append(v6, tu)
		}
	}
	return v4, v6
}

// TestKernelJHash proves JHashMod and the key layouts equal what the
// kernel computes for `jhash ... mod N seed S offset O`: it sends UDP and
// TCP packets from chosen sources inside a fresh network namespace, lets
// nftables store each packet's hash in a set, and compares every element
// with Go. It needs root and nft; the host namespace is never touched.
func TestKernelJHash(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
	ctx := t.Context()
	ns := fmt.Sprintf("swyd-maglev-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	host := command.ExecRunner{}
	if _, err := host.Run(ctx, []string{"ip", "netns", "add", ns}, nil); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		// t.Context() is already canceled when cleanups run.
		if _, err := host.Run(context.Background(), []string{"ip", "netns", "del", ns}, nil); err != nil {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	in := command.ExecRunner{Prefix: []string{"ip", "netns", "exec", ns}}
	for _, argv := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		// Every address of both prefixes is local, so packets from
		// them to them stay on lo.
		{"ip", "route", "add", "local", "10.0.0.0/8", "dev", "lo", "table", "local"},
		{"ip", "-6", "route", "add", "local", "fd00::/16", "dev", "lo", "table", "local"},
	} {
		if _, err := in.Run(ctx, argv, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Run(ctx, []string{"nft", "-f", "-"}, []byte(kernelRules())); err != nil {
		t.Fatalf("load rules:\n%s\n%v", kernelRules(), err)
	}
	v4, v6 := kernelTuples(100)
	if err := inNamespace(ns, func() error { return sendProbes(append(v4, v6...)) }); err != nil {
		t.Fatal(err)
	}

	for _, p := range kernelProbes {
		t.Run(p.set, func(t *testing.T) {
			out, err := in.Run(ctx, []string{"nft", "-j", "list", "set", "inet", kernelTable, p.set}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := parseMarks(out, p.flow)
			if err != nil {
				t.Fatal(err)
			}
			tuples := v4
			if p.ip6 {
				tuples = v6
			}
			want := map[kernelTuple]uint32{}
			for _, tu := range tuples {
				key := AddrKey(tu.addr)
				if p.flow {
					key = FlowKey(tu.addr, tu.port)
				} else {
					tu.port = 0
				}
				want[tu] = JHashMod(key, p.seed, p.modulus) + p.offset
			}
			if len(got) != len(want) {
				t.Errorf("kernel stored %d elements, want %d", len(got), len(want))
			}
			bad := 0
			for tu, w := range want {
				if g, ok := got[tu]; !ok || g != w {
					bad++
					t.Errorf("%s port %d: kernel %#x (present %v), Go %#x", tu.addr, tu.port, g, ok, w)
				}
			}
			t.Logf("%d of %d kernel hashes equal Go's", len(want)-bad, len(want))
		})
	}
}

// inNamespace runs fn on an OS thread switched into the named network
// namespace. The thread is never unlocked, so Go discards it when the
// goroutine ends and no other code ever runs in the namespace by mistake.
func inNamespace(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// A panic here would end the process before the test's
		// cleanup deletes the namespace.
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("in namespace %s: panic: %v", name, r)
			}
		}()
		h, err := netns.GetFromName(name)
		if err != nil {
			errc <- fmt.Errorf("open namespace %s: %w", name, err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("enter namespace %s: %w", name, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// sendProbes sends, from each tuple, one UDP datagram and one TCP SYN to
// port 9 of the lowest address of the tuple's prefix. Nothing listens:
// the SYN is refused, which is all the output hook needs to see it.
func sendProbes(tuples []kernelTuple) error {
	for _, tu := range tuples {
		for _, typ := range []int{unix.SOCK_DGRAM, unix.SOCK_STREAM} {
			if err := sendOne(tu, typ); err != nil {
				return fmt.Errorf("from %s port %d: %w", tu.addr, tu.port, err)
			}
		}
	}
	return nil
}

func sendOne(tu kernelTuple, typ int) error {
	domain, level, freebind := unix.AF_INET6, unix.SOL_IPV6, unix.IPV6_FREEBIND
	var local, remote unix.Sockaddr = &unix.SockaddrInet6{Port: int(tu.port), Addr: tu.addr.As16()},
		&unix.SockaddrInet6{Port: 9, Addr: netip.MustParseAddr("fd00::1").As16()}
	if tu.addr.Is4() {
		domain, level, freebind = unix.AF_INET, unix.SOL_IP, unix.IP_FREEBIND
		local = &unix.SockaddrInet4{Port: int(tu.port), Addr: tu.addr.As4()}
		remote = &unix.SockaddrInet4{Port: 9, Addr: [4]byte{10, 0, 0, 1}}
	}
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	// Freebind: IPv6 does not treat an address of a local route as
	// bindable the way IPv4 does.
	if err := unix.SetsockoptInt(fd, level, freebind, 1); err != nil {
		return fmt.Errorf("freebind: %w", err)
	}
	if err := unix.Bind(fd, local); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if typ == unix.SOCK_DGRAM {
		if err := unix.Sendto(fd, []byte("maglev"), 0, remote); err != nil {
			return fmt.Errorf("sendto: %w", err)
		}
		return nil
	}
	if err := unix.Connect(fd, remote); err != unix.ECONNREFUSED {
		return fmt.Errorf("connect: %v, want %v", err, unix.ECONNREFUSED)
	}
	return nil
}

// parseMarks reads `nft -j list set` of a probe set: elements
// {"concat": [addr, port, mark]} or, without a port, [addr, mark].
func parseMarks(out []byte, flow bool) (map[kernelTuple]uint32, error) {
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []struct {
					Concat []json.RawMessage `json:"concat"`
				} `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("parse nft -j: %w", err)
	}
	got := map[kernelTuple]uint32{}
	for _, obj := range doc.Nftables {
		if obj.Set == nil {
			continue
		}
		for _, e := range obj.Set.Elem {
			var (
				addr string
				tu   kernelTuple
				mark uint32
			)
			fields := []any{&addr, &mark}
			if flow {
				fields = []any{&addr, &tu.port, &mark}
			}
			if len(e.Concat) != len(fields) {
				return nil, fmt.Errorf("element %s: want %d fields", e.Concat, len(fields))
			}
			for i, f := range fields {
				if err := json.Unmarshal(e.Concat[i], f); err != nil {
					return nil, fmt.Errorf("element %s field %d: %w", e.Concat, i, err)
				}
			}
			a, err := netip.ParseAddr(addr)
			if err != nil {
				return nil, fmt.Errorf("element %s: %w", e.Concat, err)
			}
			tu.addr = a
			got[tu] = mark
		}
	}
	return got, nil
}
