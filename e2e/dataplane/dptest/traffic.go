package dptest

import (
	"errors"
	"math"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// CheckShares asserts the connections of res spread over the backends
// within ±5σ of the binomial expectation, with no failures. The e2e
// packages make dozens of these checks of three backends each per run: at
// ±4σ (a false alarm 6·10⁻⁵ per backend) one failed in about one run in a
// hundred (a clean-clone CI run: 133 of 300 against 100±32.7); at ±5σ
// (6·10⁻⁷) that is about one in ten thousand, while a wrong probability
// (1/2 for 1/3 over 300 connections) still lands 6σ off.
func CheckShares(t testing.TB, res probe.Result, backends int) {
	t.Helper()
	if len(res.Failures) > 0 {
		t.Fatalf("%d failures, first: %v", len(res.Failures), res.Failures[0])
	}
	n := float64(res.Attempts)
	p := 1 / float64(backends)
	mean, sigma := n*p, math.Sqrt(n*p*(1-p))
	if len(res.Counts) != backends {
		t.Fatalf("reached %d backends, want %d: %v", len(res.Counts), backends, res.Counts)
	}
	for name, c := range res.Counts {
		if math.Abs(float64(c)-mean) > 5*sigma {
			t.Errorf("backend %s got %d of %d, want %.0f±%.0f", name, c, res.Attempts, mean, 5*sigma)
		}
	}
	t.Logf("shares: %v", res.Counts)
}

// Exchange sends one datagram on c and returns the name of the backend
// that answered.
func Exchange(t testing.TB, c *net.UDPConn) string {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("probe")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	name, _, err := echo.ParseReply(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// CheckSpread sends 300 connections, 8 at a time, from namespace ns to
// dst and checks they spread over the bed's pods (CheckShares). It
// returns what the probe saw.
func (b *Bed) CheckSpread(t testing.TB, ns string, dst netip.AddrPort) probe.Result {
	t.Helper()
	res, err := probe.New(b.Topo, ns).TCP(t.Context(), dst, probe.Options{Count: 300, Parallel: 8})
	if err != nil {
		t.Fatal(err)
	}
	CheckShares(t, res, len(b.Pods))
	return res
}

// CheckPinned sends 50 connections from namespace ns to dst and checks
// they all reach one backend (ClientIP affinity).
func (b *Bed) CheckPinned(t testing.TB, ns string, dst netip.AddrPort) {
	t.Helper()
	res, err := probe.New(b.Topo, ns).TCP(t.Context(), dst, probe.Options{Count: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 || len(res.Counts) != 1 {
		t.Fatalf("want all 50 on one backend, got %v, failures %v", res.Counts, res.Failures)
	}
}

// CheckRefusedFast sends 5 connections from namespace ns to dst and checks
// each is refused, all five within a second (a service without
// endpoints rejects rather than drops).
func (b *Bed) CheckRefusedFast(t testing.TB, ns string, dst netip.AddrPort) {
	t.Helper()
	b.checkRefused(t, ns, dst, 2*time.Second, time.Second)
}

// CheckRefusedWithin sends 5 connections from namespace ns to dst, one
// after the other, and checks each is refused (connection refused, not a
// timeout) within d of its start.
func (b *Bed) CheckRefusedWithin(t testing.TB, ns string, dst netip.AddrPort, d time.Duration) {
	t.Helper()
	b.checkRefused(t, ns, dst, d, 5*d)
}

// checkRefused makes 5 attempts of at most perAttempt each (one that is
// not refused by then fails as a timeout) and wants every one refused,
// all within total.
func (b *Bed) checkRefused(t testing.TB, ns string, dst netip.AddrPort, perAttempt, total time.Duration) {
	t.Helper()
	res, err := probe.New(b.Topo, ns).TCP(t.Context(), dst, probe.Options{Count: 5, Timeout: perAttempt})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 5 {
		t.Fatalf("want 5 failures, got %v", res)
	}
	for _, f := range res.Failures {
		if f.Reason != probe.ReasonRefused {
			t.Errorf("attempt %d: %s, want refused within %v", f.Attempt, f.Reason, perAttempt)
		}
	}
	if res.Elapsed > total {
		t.Errorf("5 refusals took %v: not fast", res.Elapsed)
	}
}

// CheckUDPRefused sends 5 UDP exchanges, one after the other, from
// namespace ns to dst and checks each is refused within RefuseWithin:
// ECONNREFUSED on the read, from the ICMP port unreachable of a reject on
// the forward path, or EPERM on the write, when the sender's own
// namespace rejects it on output (the kernel drops the datagram before it
// leaves and says so to the sender).
func (b *Bed) CheckUDPRefused(t testing.TB, ns string, dst netip.AddrPort) {
	t.Helper()
	res, err := probe.New(b.Topo, ns).UDP(t.Context(), dst, probe.Options{Count: 5, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 5 {
		t.Fatalf("want 5 failures, got %v", res)
	}
	for _, f := range res.Failures {
		if f.Reason != probe.ReasonRefused && !errors.Is(f.Err, syscall.EPERM) {
			t.Errorf("attempt %d: %s (%v), want refused", f.Attempt, f.Reason, f.Err)
		}
	}
	if res.Elapsed > 5*RefuseWithin {
		t.Errorf("5 refusals took %v: not at once", res.Elapsed)
	}
}

// CheckDropped sends 3 connections at once from namespace ns to dst and
// checks each times out (dropped, not refused).
func (b *Bed) CheckDropped(t testing.TB, ns string, dst netip.AddrPort) {
	t.Helper()
	res, err := probe.New(b.Topo, ns).TCP(t.Context(), dst, probe.Options{Count: 3, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures {
		if f.Reason != probe.ReasonTimeout {
			t.Errorf("attempt %d: %s, want timeout (dropped)", f.Attempt, f.Reason)
		}
	}
	if len(res.Failures) != 3 {
		t.Errorf("want 3 dropped attempts, got %v", res.Counts)
	}
}

// CheckAnswered sends count connections from namespace ns to dst and
// checks every one is answered; what names the check in the failure.
func (b *Bed) CheckAnswered(t testing.TB, ns string, dst netip.AddrPort, count int, what string) {
	t.Helper()
	res, err := probe.New(b.Topo, ns).TCP(t.Context(), dst, probe.Options{Count: count})
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("%s: %v %v", what, err, res.Failures)
	}
}

// CheckAnsweredBy is CheckAnswered that also wants exactly backends
// backends to have answered.
func (b *Bed) CheckAnsweredBy(t testing.TB, ns string, dst netip.AddrPort, count, backends int, what string) {
	t.Helper()
	res, err := probe.New(b.Topo, ns).TCP(t.Context(), dst, probe.Options{Count: count})
	if err != nil || len(res.Failures) > 0 || len(res.Counts) != backends {
		t.Fatalf("%s: %v %v %v", what, err, res.Counts, res.Failures)
	}
}
