package nftables

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestHotSetsFirst(t *testing.T) {
	in := []string{"cluster-ips", "endpoints-sctp-00", "endpoints-tcp-01", "hairpin-endpoints", "service-ips"}
	want := []string{"cluster-ips", "hairpin-endpoints", "service-ips", "endpoints-sctp-00", "endpoints-tcp-01"}
	if got := hotSetsFirst(in); !cmp.Equal(got, want) {
		t.Errorf("hotSetsFirst = %q, want %q", got, want)
	}
}
