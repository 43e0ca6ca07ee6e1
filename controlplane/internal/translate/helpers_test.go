package translate

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func addrs(ss ...string) []netip.Addr { return parseAll(netip.MustParseAddr, ss) }

func prefixes(ss ...string) []netip.Prefix { return parseAll(netip.MustParsePrefix, ss) }

// parseAll parses each of ss with parse, which panics on a bad one.
func parseAll[T any](parse func(string) T, ss []string) []T {
	out := make([]T, len(ss))
	for i, s := range ss {
		out[i] = parse(s)
	}
	return out
}

// modified returns v changed by each of mods in turn: the test builders'
// way to state only how a case differs from the minimal object.
func modified[T any](v *T, mods []func(*T)) *T {
	for _, mod := range mods {
		mod(v)
	}
	return v
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

// translateCase is one case of a translator test: the object in (nil
// included) and what translating it must give.
type translateCase[In, Out any] struct {
	name       string
	in         In
	want       *Out
	wantSkip   Reason
	wantCounts string
}

// runTranslateCases runs translate on each case's object and checks the
// outcome and, when there is a result, invariants (nil: none to check).
func runTranslateCases[In, Out any](t *testing.T, translate func(In, Recorder) (*Out, error), invariants func(*Out) error, cases []translateCase[In, Out]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			counts := NewCounts()
			got, err := translate(tc.in, counts)
			checkOutcome(t, err, tc.wantSkip, tc.want, got, tc.wantCounts, counts)
			if got != nil && invariants != nil {
				if err := invariants(got); err != nil {
					t.Errorf("invariants: %v", err)
				}
			}
		})
	}
}

func cmpDiff(want, got any) string { return cmp.Diff(want, got, cmpOpts) }
