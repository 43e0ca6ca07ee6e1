package dptest

import (
	"math"
	"net"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// CheckShares asserts the connections of res spread over the backends
// within ±4σ of the binomial expectation, with no failures.
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
		if math.Abs(float64(c)-mean) > 4*sigma {
			t.Errorf("backend %s got %d of %d, want %.0f±%.0f", name, c, res.Attempts, mean, 4*sigma)
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
