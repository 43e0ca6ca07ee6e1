package translate

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// checkOutcome compares the parts every translator test checks: the skip
// reason ("" for success), the result and the recorded counts.
func checkOutcome[T any](t *testing.T, err error, wantSkip Reason, want, got T, wantCounts string, counts *Counts) {
	t.Helper()
	if err != nil && !IsSkip(err) {
		t.Fatalf("error is not a skip: %v", err)
	}
	gotSkip, _ := SkipReason(err)
	if gotSkip != wantSkip {
		t.Errorf("skip reason = %q (err %v), want %q", gotSkip, err, wantSkip)
	}
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("result mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCounts, counts.String()); diff != "" {
		t.Errorf("counts mismatch (-want +got):\n%s", diff)
	}
}

func cmpDiff(want, got any) string { return cmp.Diff(want, got, cmpOpts) }
