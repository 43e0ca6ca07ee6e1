package translate

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCounts(t *testing.T) {
	cases := []struct {
		name       string
		record     []Count
		want       []Count
		wantString string
	}{
		{name: "empty", wantString: ""},
		{
			name: "sorted by kind then reason",
			record: []Count{
				{Kind: KindService, Reason: ReasonInvalidIP, N: 2},
				{Kind: KindEndpointSlice, Reason: ReasonWrongFamily, N: 1},
				{Kind: KindService, Reason: ReasonHeadless, N: 3},
			},
			want: []Count{
				{Kind: KindEndpointSlice, Reason: ReasonWrongFamily, N: 1},
				{Kind: KindService, Reason: ReasonHeadless, N: 3},
				{Kind: KindService, Reason: ReasonInvalidIP, N: 2},
			},
			wantString: "EndpointSlice/WrongFamily=1 Service/Headless=3 Service/InvalidIP=2",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c Counts // the zero value is usable
			for _, r := range tc.record {
				for range r.N {
					c.Record(r.Kind, r.Reason)
				}
			}
			if diff := cmp.Diff(tc.want, c.Snapshot(), cmpEmptyAsNil); diff != "" {
				t.Errorf("Snapshot mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantString, c.String()); diff != "" {
				t.Errorf("String mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

var cmpEmptyAsNil = cmp.Transformer("emptyAsNil", func(in []Count) []Count {
	if len(in) == 0 {
		return nil
	}
	return in
})

func TestCountsConcurrent(t *testing.T) {
	c := NewCounts()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Record(KindNode, ReasonInvalidIP)
				_ = c.String()
			}
		})
	}
	wg.Wait()
	if got := c.Get(KindNode, ReasonInvalidIP); got != 8000 {
		t.Errorf("Get = %d, want 8000", got)
	}
	if got := c.Total(); got != 8000 {
		t.Errorf("Total = %d, want 8000", got)
	}
}

func TestCountsNil(t *testing.T) {
	var c *Counts
	c.Record(KindNode, ReasonInvalidIP)
	if c.Get(KindNode, ReasonInvalidIP) != 0 || c.Total() != 0 || c.String() != "" || c.Snapshot() != nil {
		t.Errorf("nil Counts is not empty")
	}
}

func TestSkipError(t *testing.T) {
	skip := &SkipError{Kind: KindService, Namespace: "ns", Name: "web", Reason: ReasonHeadless, Detail: `clusterIP "None"`}
	cases := []struct {
		name       string
		err        error
		wantSkip   bool
		wantReason Reason
	}{
		{name: "direct", err: skip, wantSkip: true, wantReason: ReasonHeadless},
		{name: "wrapped", err: fmt.Errorf("sync: %w", skip), wantSkip: true, wantReason: ReasonHeadless},
		{name: "other", err: errors.New("boom")},
		{name: "nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, ok := SkipReason(tc.err)
			if diff := cmp.Diff([]any{tc.wantSkip, tc.wantSkip, tc.wantReason}, []any{IsSkip(tc.err), ok, reason}); diff != "" {
				t.Errorf("IsSkip, SkipReason mismatch (-want +got):\n%s", diff)
			}
		})
	}
	want := `skipping Service "ns/web": Headless: clusterIP "None"`
	if diff := cmp.Diff(want, skip.Error()); diff != "" {
		t.Errorf("Error() mismatch (-want +got):\n%s", diff)
	}
	node := &SkipError{Kind: KindNode, Name: "n1", Reason: ReasonInvalidName}
	if diff := cmp.Diff(`skipping Node "n1": InvalidName`, node.Error()); diff != "" {
		t.Errorf("Error() mismatch (-want +got):\n%s", diff)
	}
}
