package sorted_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

func TestKeys(t *testing.T) {
	got := sorted.Keys(map[string]int{"b": 1, "c": 2, "a": 3})
	if d := cmp.Diff([]string{"a", "b", "c"}, got); d != "" {
		t.Errorf("Keys (-want +got):\n%s", d)
	}
	if got := sorted.Keys(map[string]bool{}); got == nil || len(got) != 0 {
		t.Errorf("Keys of an empty map = %#v, want an empty non-nil slice", got)
	}
}

func TestKeysFunc(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::1")
	got := sorted.KeysFunc(map[netip.Addr]bool{b: true, a: true}, netip.Addr.Compare)
	if d := cmp.Diff([]netip.Addr{a, b}, got, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); d != "" {
		t.Errorf("KeysFunc (-want +got):\n%s", d)
	}
}
