package xtinfo

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRequestAndParse(t *testing.T) {
	b, err := request("nat")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 84 || string(b[:4]) != "nat\x00" {
		t.Fatalf("request %q (%d bytes), want the name NUL-padded to 32 and 84 bytes in all", b[:8], len(b))
	}
	// A reply as the kernel writes it: name, valid_hooks, hook_entry[5],
	// underflow[5], num_entries, size, in native order.
	for i, v := range []uint32{0x1b, 0, 152, 0, 304, 456, 0, 152, 0, 304, 456, 42, 8192} {
		binary.NativeEndian.PutUint32(b[32+4*i:], v)
	}
	got, err := parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Info{ValidHooks: 0x1b, HookEntry: [5]uint32{0, 152, 0, 304, 456}, Underflow: [5]uint32{0, 152, 0, 304, 456}, Entries: 42, Size: 8192}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := parse(b[:80]); err == nil {
		t.Error("short reply accepted")
	}
	for _, bad := range []string{"", "a-table-name-of-more-than-31-chars"} {
		if _, err := request(bad); err == nil {
			t.Errorf("table name %q accepted", bad)
		}
	}
}
