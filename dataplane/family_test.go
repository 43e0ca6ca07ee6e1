package dataplane_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

func TestFamilies(t *testing.T) {
	both := []dataplane.Family{dataplane.IPv4, dataplane.IPv6}
	for _, tc := range []struct {
		name    string
		in      []dataplane.Family
		want    []dataplane.Family
		wantErr bool
	}{
		{name: "empty: both", in: nil, want: both},
		{name: "as given", in: []dataplane.Family{dataplane.IPv6}, want: []dataplane.Family{dataplane.IPv6}},
		{name: "unknown", in: []dataplane.Family{dataplane.IPv4, 5}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dataplane.Families(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Families(%v) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Families(%v) (-want +got):\n%s", tc.in, d)
			}
		})
	}
}
