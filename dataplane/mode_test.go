package dataplane_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestModeName(t *testing.T) {
	for m, want := range map[switchyardv1.DataplaneMode]string{
		switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED: "",
		switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES:    "iptables",
		switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS:        "ipvs",
		switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES:    "nftables",
		switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE:   "userspace",
		switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN:     "dry-run",
		switchyardv1.DataplaneMode(99):                        "99",
	} {
		if got := dataplane.ModeName(m); got != want {
			t.Errorf("ModeName(%v) = %q, want %q", m, got, want)
		}
	}
}
