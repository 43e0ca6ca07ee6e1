package traffic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// BulkResult is one connection's throughput.
type BulkResult struct {
	Seconds float64 `json:"seconds"`
	Bytes   uint64  `json:"bytes"` // what the sink counted
	// BitsPerSecond is Bytes×8 over the time from the first write until
	// the sink's count arrived.
	BitsPerSecond float64 `json:"bitsPerSecond"`
}

// bulkChunk is the size of one write.
const bulkChunk = 256 << 10

// Bulk connects from ns to target, writes for d, half-closes and waits
// for the sink's count.
func Bulk(n Namespaces, ns string, target netip.AddrPort, d, timeout time.Duration) (BulkResult, error) {
	var c net.Conn
	err := n.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", target.String(), timeout)
		return err
	})
	if err != nil {
		return BulkResult{}, fmt.Errorf("bulk to %s: %w", target, err)
	}
	defer func() { _ = c.Close() }()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return BulkResult{}, errors.New("bulk: not a TCP connection")
	}
	// The sink's answer must arrive within timeout of the last write.
	if err := c.SetDeadline(time.Now().Add(d + timeout)); err != nil {
		return BulkResult{}, err
	}
	buf := make([]byte, bulkChunk)
	start := time.Now()
	for time.Since(start) < d {
		if _, err := c.Write(buf); err != nil {
			return BulkResult{}, fmt.Errorf("bulk to %s: %w", target, err)
		}
	}
	if err := tc.CloseWrite(); err != nil {
		return BulkResult{}, fmt.Errorf("bulk to %s: half-close: %w", target, err)
	}
	var b [8]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return BulkResult{}, fmt.Errorf("bulk to %s: the sink's count: %w", target, err)
	}
	elapsed := time.Since(start)
	got := binary.BigEndian.Uint64(b[:])
	return BulkResult{Seconds: elapsed.Seconds(), Bytes: got, BitsPerSecond: float64(got) * 8 / elapsed.Seconds()}, nil
}
