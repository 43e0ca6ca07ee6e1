package nftgen

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"
)

// newGen is the kernel's NFT_MSG_NEWGEN for id, as nf_tables_fill_gen_info
// writes it: nfgenmsg (AF_UNSPEC, v0, low 16 bits of the id big-endian),
// then the id, the pid and the name.
func newGen(req netlink.Message, id uint32, comm string) netlink.Message {
	attrs := []netlink.Attribute{
		{Type: unix.NFTA_GEN_ID, Data: be32(id)},
		{Type: unix.NFTA_GEN_PROC_PID, Data: be32(4242)},
		{Type: unix.NFTA_GEN_PROC_NAME, Data: append([]byte(comm), 0)},
	}
	return netlink.Message{
		Header: netlink.Header{Type: newGenType, Sequence: req.Header.Sequence, PID: nltest.PID},
		Data:   append([]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, byte(id >> 8), byte(id)}, nltest.MustMarshalAttributes(attrs)...),
	}
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func TestRequestEncoding(t *testing.T) {
	m := Request()
	// NFNL_SUBSYS_NFTABLES (10) << 8 | NFT_MSG_GETGEN (16); no dump, no ack:
	// the kernel answers with exactly one NEWGEN.
	if m.Header.Type != 0x0a10 || m.Header.Flags != netlink.Request {
		t.Errorf("header %+v, want type 0x0a10, flags Request", m.Header)
	}
	if d := cmp.Diff([]byte{unix.AF_UNSPEC, 0, 0, 0}, m.Data); d != "" {
		t.Errorf("nfgenmsg (-want +got):\n%s", d)
	}
}

func TestParse(t *testing.T) {
	req := Request()
	for _, tc := range []struct {
		name    string
		msg     netlink.Message
		want    Gen
		wantErr bool
	}{
		{"reply", newGen(req, 0x01020304, "nft"), Gen{ID: 0x01020304, PID: 4242, Comm: "nft"}, false},
		{"id only", netlink.Message{Header: netlink.Header{Type: newGenType},
			Data: append([]byte{0, 0, 0, 7}, nltest.MustMarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_GEN_ID, Data: be32(7)}})...)},
			Gen{ID: 7}, false},
		{"wrong type", netlink.Message{Header: netlink.Header{Type: getGenType}, Data: []byte{0, 0, 0, 0}}, Gen{}, true},
		{"no id", netlink.Message{Header: netlink.Header{Type: newGenType}, Data: []byte{0, 0, 0, 0}}, Gen{}, true},
		{"short", netlink.Message{Header: netlink.Header{Type: newGenType}, Data: []byte{0}}, Gen{}, true},
		{"bad attributes", netlink.Message{Header: netlink.Header{Type: newGenType}, Data: []byte{0, 0, 0, 0, 9, 0}}, Gen{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.msg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestReaderRedialsAfterFailure(t *testing.T) {
	id, dials := uint32(10), 0
	fail := false
	fn := nltest.CheckRequest([]netlink.HeaderType{getGenType}, []netlink.HeaderFlags{netlink.Request},
		func(reqs []netlink.Message) ([]netlink.Message, error) {
			if fail {
				return nltest.Error(int(unix.EPERM), reqs)
			}
			id++
			return []netlink.Message{newGen(reqs[0], id, "nft")}, nil
		})
	r := NewReader(func() (*netlink.Conn, error) { dials++; return nltest.Dial(fn), nil })
	ctx := context.Background()
	for want := uint32(11); want <= 12; want++ {
		if got, err := r.Generation(ctx); err != nil || got != want {
			t.Fatalf("Generation = %d, %v; want %d", got, err, want)
		}
	}
	fail = true
	if _, err := r.Generation(ctx); !errors.Is(err, unix.EPERM) {
		t.Fatalf("want EPERM, got %v", err)
	}
	fail = false
	if got, err := r.Generation(ctx); err != nil || got != 13 {
		t.Fatalf("after a failure: %d, %v", got, err)
	}
	if dials != 2 {
		t.Errorf("%d dials, want 2 (one lasting connection, one after the failure)", dials)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Generation(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestSince(t *testing.T) {
	for _, tc := range []struct{ before, after, want uint32 }{
		{5, 5, 0}, {5, 6, 1}, {5, 9, 4},
		{math.MaxUint32, 1, 1}, // the wrap skips 0
		{math.MaxUint32 - 1, 2, 3},
	} {
		if got := Since(tc.before, tc.after); got != tc.want {
			t.Errorf("Since(%d, %d) = %d, want %d", tc.before, tc.after, got, tc.want)
		}
	}
}
