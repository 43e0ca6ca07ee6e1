package userspace

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// BenchmarkPath measures what the userspace proxy costs, against a direct
// connection to the pod and, for reference, a kernel DNAT (the iptables
// mode's data path) on one node with one pod, from the client namespace:
//   - connect: open a TCP connection, read the echo server's first line,
//     close (ns/op is the connection latency);
//   - rtt: one 64-byte request and its echo on an open TCP connection;
//   - throughput: 64 KiB written and echoed back on an open connection
//     (MB/s counts the bytes once);
//   - udp-rtt: one 64-byte datagram and its reply, one client socket
//     (one session).
//
// Added latency is the difference between a path and "direct". Sockets
// on both ends are opened by workers already inside the namespaces, so
// no setns is measured. Numbers are wall time on a shared machine: compare
// rows of one run, not runs.
func BenchmarkPath(b *testing.B) {
	bed := newBed(b, bedOptions{pods: 1})
	pod := bed.pods[0]
	bed.apply(b, bed.state(bed.svc("web", vip, 0, tcp, pod), bed.svc("dns", udpVIP, 0, udp, pod)))
	for _, rule := range []string{
		"-t nat -A PREROUTING -p tcp -d " + dnatVIP.Addr().String() + " --dport 80 -j DNAT --to-destination " + pod.IP.String() + ":8080",
		"-t nat -A PREROUTING -p udp -d " + dnatVIP.Addr().String() + " --dport 53 -j DNAT --to-destination " + pod.IP.String() + ":8080",
	} {
		if _, err := bed.topo.Exec(b.Context(), bed.node.NS, append([]string{"iptables"}, strings.Fields(rule)...)...); err != nil {
			b.Fatal(err)
		}
	}
	client := newNSSockets(b, bed.topo, bed.topo.Client().NS, 2)
	podAddr := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(pod.IP, port) }
	for _, path := range []struct {
		name     string
		tcp, udp netip.AddrPort
	}{
		{"direct", podAddr(8080), podAddr(8080)},
		{"userspace", vip, udpVIP},
		{"iptables-dnat", dnatVIP, netip.AddrPortFrom(dnatVIP.Addr(), 53)},
	} {
		b.Run(path.name+"/connect", func(b *testing.B) {
			for b.Loop() {
				c := dialTCP(b, client, path.tcp)
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
		b.Run(path.name+"/rtt", func(b *testing.B) {
			c, r := openEcho(b, client, path.tcp)
			req, resp := bytes.Repeat([]byte("x"), 64), make([]byte, 64)
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(r, resp); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(path.name+"/throughput", func(b *testing.B) {
			c, r := openEcho(b, client, path.tcp)
			const chunk = 64 << 10
			b.SetBytes(chunk)
			buf := make([]byte, chunk)
			errc := make(chan error, 1)
			go func() {
				out := make([]byte, chunk)
				for range b.N {
					if _, err := c.Write(out); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for range b.N {
				if _, err := io.ReadFull(r, buf); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
		b.Run(path.name+"/udp-rtt", func(b *testing.B) {
			c, err := client.DialUDP(b.Context(), path.udp)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			req, resp := bytes.Repeat([]byte("x"), 64), make([]byte, 2048)
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var (
	udpVIP  = netip.MustParseAddrPort("10.96.0.53:53")
	dnatVIP = netip.MustParseAddrPort("10.96.1.10:80")
)

func dialTCP(b *testing.B, s *nsSockets, dst netip.AddrPort) *net.TCPConn {
	c, err := s.DialTCP(context.Background(), dst)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// openEcho connects and consumes the echo server's first line, leaving a
// connection that echoes.
func openEcho(b *testing.B, s *nsSockets, dst netip.AddrPort) (*net.TCPConn, *bufio.Reader) {
	c := dialTCP(b, s, dst)
	b.Cleanup(func() { c.Close() })
	r := bufio.NewReaderSize(c, 128<<10)
	if _, err := r.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	return c, r
}
