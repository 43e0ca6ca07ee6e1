package nftgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

var (
	getGenType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN)
	newGenType = netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWGEN)
)

// Gen is one reading of the generation.
type Gen struct {
	// ID is the generation: bumped by one at every commit.
	ID uint32
	// PID and Comm name the process of the last commit, when the kernel
	// says (it does since 5.x); informative only.
	PID  uint32
	Comm string
}

// Request is the NFT_MSG_GETGEN request: the nfgenmsg header (family
// AF_UNSPEC, version 0, resource id 0) and no attributes.
func Request() netlink.Message {
	return netlink.Message{
		Header: netlink.Header{Type: getGenType, Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
}

// Parse decodes an NFT_MSG_NEWGEN message.
func Parse(m netlink.Message) (Gen, error) {
	var g Gen
	if m.Header.Type != newGenType {
		return g, fmt.Errorf("nftgen: message type %#x, want NFT_MSG_NEWGEN (%#x)", uint16(m.Header.Type), uint16(newGenType))
	}
	if len(m.Data) < 4 {
		return g, fmt.Errorf("nftgen: short message (%d bytes)", len(m.Data))
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err != nil {
		return g, fmt.Errorf("nftgen: %w", err)
	}
	ad.ByteOrder = binary.BigEndian
	found := false
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_GEN_ID:
			g.ID, found = ad.Uint32(), true
		case unix.NFTA_GEN_PROC_PID:
			g.PID = ad.Uint32()
		case unix.NFTA_GEN_PROC_NAME:
			g.Comm = ad.String()
		}
	}
	if err := ad.Err(); err != nil {
		return g, fmt.Errorf("nftgen: %w", err)
	}
	if !found {
		return g, errors.New("nftgen: reply without NFTA_GEN_ID")
	}
	return g, nil
}

// Get asks the kernel for the generation over c, a NETLINK_NETFILTER
// connection. The context's deadline, if any, bounds the exchange.
func Get(ctx context.Context, c *netlink.Conn) (Gen, error) {
	if err := ctx.Err(); err != nil {
		return Gen{}, err
	}
	if dl, ok := ctx.Deadline(); ok {
		if err := c.SetDeadline(dl); err == nil {
			defer func() { _ = c.SetDeadline(time.Time{}) }()
		}
	}
	msgs, err := c.Execute(Request())
	if err != nil {
		return Gen{}, fmt.Errorf("nftgen: NFT_MSG_GETGEN: %w", err)
	}
	if len(msgs) != 1 {
		return Gen{}, fmt.Errorf("nftgen: %d replies to NFT_MSG_GETGEN, want 1", len(msgs))
	}
	return Parse(msgs[0])
}

// Since returns how many commits separate two readings, wrap included
// (the kernel skips 0 when the counter wraps).
func Since(before, after uint32) uint32 {
	n := after - before
	if after < before {
		n-- // the wrap skipped 0
	}
	return n
}

// Dialer opens a NETLINK_NETFILTER connection in the namespace to read.
type Dialer func() (*netlink.Conn, error)

// DialOwnNamespace dials in the calling thread's network namespace.
func DialOwnNamespace() (*netlink.Conn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("nftgen: dial: %w", err)
	}
	return c, nil
}

// Reader reads the generation over one lasting connection, dialed at
// first use and again after a failed exchange (a socket is cheap to
// keep; closing one costs an RCU grace period in the kernel). It is
// safe for concurrent use.
type Reader struct {
	dial Dialer

	mu sync.Mutex
	c  *netlink.Conn
}

// NewReader returns a Reader over connections from dial.
func NewReader(dial Dialer) *Reader { return &Reader{dial: dial} }

// Generation returns the current generation id.
func (r *Reader) Generation(ctx context.Context) (uint32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		c, err := r.dial()
		if err != nil {
			return 0, fmt.Errorf("nftgen: dial: %w", err)
		}
		r.c = c
	}
	g, err := Get(ctx, r.c)
	if err != nil {
		_ = r.c.Close()
		r.c = nil
		return 0, err
	}
	return g.ID, nil
}

// Close closes the connection, if open; the next Generation redials.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return nil
	}
	err := r.c.Close()
	r.c = nil
	return err
}
