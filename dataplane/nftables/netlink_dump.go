package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Dumps of the drift read-back. The kernel fills a dump's reply one
// datagram at a time, of the size of the largest buffer the reader has
// offered (capped near 32 KiB), and each datagram resumes the walk of
// the table from its start, skipping what was sent. mdlayher/netlink,
// which google/nftables reads through, peeks at each datagram with an
// empty buffer and then reads exactly its size, so the kernel keeps
// sending ~4 KiB pieces: reading back 5,000 services took ~470 ms, most
// of it the kernel re-walking the rules and set elements for each piece
// (and two system calls per piece). dump reads with a 64 KiB buffer.

// dumpBuffer is the receive buffer of a dump: more than the kernel's
// largest piece.
const dumpBuffer = 64 << 10

// dump sends an nf_tables dump request (msgType, the family's nfgenmsg,
// attrs) and returns every reply message up to NLMSG_DONE.
func dump(c *netlink.Conn, msgType int, fam dataplane.Family, attrs []netlink.Attribute) ([]netlink.Message, error) {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, err
	}
	req, err := c.Send(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType), Flags: netlink.Request | netlink.Dump},
		Data:   append([]byte{byte(nfproto(fam)), unix.NFNETLINK_V0, 0, 0}, data...),
	})
	if err != nil {
		return nil, err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, dumpBuffer)
	var out []netlink.Message
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, _, _, rerr = unix.Recvmsg(int(fd), buf, nil, 0)
			return !errors.Is(rerr, unix.EAGAIN)
		}); err != nil {
			return nil, err
		}
		if rerr != nil {
			return nil, fmt.Errorf("recvmsg: %w", rerr)
		}
		done, err := parseDump(buf[:n], req.Header.Sequence, &out)
		if err != nil || done {
			return out, err
		}
	}
}

// parseDump appends the messages of one datagram of a dump reply to out;
// done at NLMSG_DONE. The messages are copied out of b.
func parseDump(b []byte, seq uint32, out *[]netlink.Message) (done bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return false, fmt.Errorf("netlink message of %d bytes in %d", l, len(b))
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(append([]byte(nil), b[:l]...)); err != nil {
			return false, err
		}
		b = b[min(nlmsgAlign(l), len(b)):]
		if m.Header.Sequence != seq {
			continue // a late reply to something else
		}
		switch m.Header.Type {
		case netlink.Done:
			return true, nil
		case netlink.Error:
			if len(m.Data) >= 4 {
				if e := int32(binary.NativeEndian.Uint32(m.Data)); e != 0 {
					return false, unix.Errno(-e)
				}
			}
			return true, nil
		}
		*out = append(*out, m)
	}
	return false, nil
}

func nlmsgAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

func tableAttr(typ uint16, table string) netlink.Attribute {
	return netlink.Attribute{Type: typ, Data: append([]byte(table), 0)}
}

// dumpChains returns the chains of the table.
func dumpChains(c *netlink.Conn, fam dataplane.Family, table string) (map[string]*kernelChain, error) {
	msgs, err := dump(c, unix.NFT_MSG_GETCHAIN, fam, []netlink.Attribute{tableAttr(unix.NFTA_CHAIN_TABLE, table)})
	if err != nil {
		return nil, fmt.Errorf("dump chains: %w", err)
	}
	chains := map[string]*kernelChain{}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		tbl, name, base, err := decodeChain(m.Data[4:])
		if err != nil {
			return nil, fmt.Errorf("decode chain: %w", err)
		}
		if tbl == table { // older kernels dump every table's chains
			chains[name] = &kernelChain{base: base}
		}
	}
	return chains, nil
}

// decodeChain returns a chain message's table, name and, for a base
// chain, "type hook priority".
func decodeChain(b []byte) (table, name, base string, err error) {
	ad, err := nfAttrs(b)
	if err != nil {
		return "", "", "", err
	}
	var typ, hook, prio string
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_CHAIN_TABLE:
			table = ad.String()
		case unix.NFTA_CHAIN_NAME:
			name = ad.String()
		case unix.NFTA_CHAIN_TYPE:
			typ = ad.String()
		case unix.NFTA_CHAIN_HOOK:
			ad.Nested(func(h *netlink.AttributeDecoder) error {
				for h.Next() {
					switch h.Type() {
					case unix.NFTA_HOOK_HOOKNUM:
						n := h.Uint32()
						if hook = hookNames[n]; hook == "" {
							hook = "hook" + strconv.FormatUint(uint64(n), 10)
						}
					case unix.NFTA_HOOK_PRIORITY:
						prio = strconv.FormatInt(int64(int32(h.Uint32())), 10)
					}
				}
				return nil
			})
		}
	}
	if hook != "" {
		base = typ + " " + hook + " " + prio
	}
	return table, name, base, ad.Err()
}

// dumpElements returns the elements of one set or map.
func dumpElements(c *netlink.Conn, fam dataplane.Family, table, set string) ([]rawElem, error) {
	msgs, err := dump(c, unix.NFT_MSG_GETSETELEM, fam, []netlink.Attribute{
		tableAttr(unix.NFTA_SET_ELEM_LIST_TABLE, table), tableAttr(unix.NFTA_SET_ELEM_LIST_SET, set)})
	if err != nil {
		return nil, fmt.Errorf("dump elements of %s: %w", set, err)
	}
	var out []rawElem
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		if err := decodeElements(m.Data[4:], &out); err != nil {
			return nil, fmt.Errorf("decode elements of %s: %w", set, err)
		}
	}
	return out, nil
}

// decodeElements appends the elements of one NEWSETELEM message: each
// NFTA_LIST_ELEM's key (NFTA_DATA_VALUE), data (the value, or a verdict's
// nested attributes) and interval-end flag.
func decodeElements(b []byte, out *[]rawElem) error {
	ad, err := nfAttrs(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			continue
		}
		ad.Nested(func(list *netlink.AttributeDecoder) error {
			for list.Next() {
				var e rawElem
				list.Nested(func(el *netlink.AttributeDecoder) error {
					for el.Next() {
						switch el.Type() {
						case unix.NFTA_SET_ELEM_KEY:
							el.Nested(func(d *netlink.AttributeDecoder) error { e.key = dataOf(d); return nil })
						case unix.NFTA_SET_ELEM_DATA:
							el.Nested(func(d *netlink.AttributeDecoder) error { e.val = dataOf(d); return nil })
						case unix.NFTA_SET_ELEM_FLAGS:
							e.end = el.Uint32()&unix.NFT_SET_ELEM_INTERVAL_END != 0
						}
					}
					return nil
				})
				*out = append(*out, e)
			}
			return nil
		})
	}
	return ad.Err()
}

// dataOf returns the payload of an nft_data attribute: the value bytes,
// or a verdict's nested attributes.
func dataOf(d *netlink.AttributeDecoder) []byte {
	var b []byte
	for d.Next() {
		switch d.Type() {
		case unix.NFTA_DATA_VALUE, unix.NFTA_DATA_VERDICT:
			b = d.Bytes()
		}
	}
	return b
}
