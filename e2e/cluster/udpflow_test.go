package cluster_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestUDPFlowAccount runs the hand-over's UDP flow against a stand-in for
// netexec's UDP server on loopback that answers some sends late and
// drops others: late answers count as answered, only drops as lost.
func TestUDPFlowAccount(t *testing.T) {
	tests := []struct {
		name     string
		drop     func(n int) bool // the n-th datagram received is not answered
		late     func(n int) bool // answered 250 ms late
		wantLost int
	}{
		{name: "all answered", drop: func(int) bool { return false }, late: func(int) bool { return false }},
		{name: "late answers are not lost", drop: func(int) bool { return false }, late: func(n int) bool { return n%7 == 3 }},
		{name: "one dropped", drop: func(n int) bool { return n == 12 }, late: func(int) bool { return false }, wantLost: 1},
		{name: "three dropped in a row, a hostname first", drop: func(n int) bool { return n >= 21 && n <= 23 }, late: func(int) bool { return false }, wantLost: 3},
		{name: "a hostname dropped", drop: func(n int) bool { return n == 11 }, late: func(int) bool { return false }, wantLost: 1},
		{name: "late and then dropped", drop: func(n int) bool { return n == 15 || n == 16 }, late: func(n int) bool { return n == 14 }, wantLost: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			var received atomic.Int64
			go func() {
				buf := make([]byte, 512)
				for {
					n, from, err := srv.ReadFrom(buf)
					if err != nil {
						return
					}
					i := int(received.Add(1))
					msg := string(buf[:n])
					reply := "pod-a"
					if rest, ok := strings.CutPrefix(msg, "echo "); ok {
						reply = rest
					}
					if tc.drop(i) {
						continue
					}
					if tc.late(i) {
						time.AfterFunc(250*time.Millisecond, func() { _, _ = srv.WriteTo([]byte(reply), from) })
						continue
					}
					_, _ = srv.WriteTo([]byte(reply), from)
				}
			}()
			conn, err := net.Dial("udp", srv.LocalAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			f := runUDPFlow(ctx, conn)
			if f.err != nil {
				t.Fatal(f.err)
			}
			if f.maxLost != tc.wantLost {
				t.Errorf("most lost in a row = %d, want %d (%d of %d answered)", f.maxLost, tc.wantLost, f.answered, f.sent)
			}
			if len(f.pods) != 1 || f.pods[0] != "pod-a" {
				t.Errorf("pods = %v, want [pod-a]", f.pods)
			}
			if f.sent < 25 || f.answered+tc.wantLost > f.sent {
				t.Errorf("%d sent, %d answered: want ~30", f.sent, f.answered)
			}
		})
	}
}
