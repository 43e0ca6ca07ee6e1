package dataplanetest

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// MaglevTable is the table a control plane sends for a service port's
// endpoints ("address:targetPort", any order): maglev.New at size
// (maglev.Size of their count when size is 0) with maglev.Seed, as a
// cluster set of the family of the addresses. It returns the table too,
// for lookups.
func MaglevTable(t testing.TB, port string, size int, endpoints ...string) (*switchyardv1.MaglevTable, maglev.Table) {
	t.Helper()
	if size == 0 {
		size = maglev.Size(len(endpoints))
	}
	tab, err := maglev.New(endpoints, size)
	if err != nil {
		t.Fatal(err)
	}
	mt := &switchyardv1.MaglevTable{PortName: port, Seed: maglev.Seed, Endpoints: tab.Backends,
		Slots: make([]uint32, len(tab.Slots))}
	for i, s := range tab.Slots {
		mt.Slots[i] = uint32(s)
	}
	return mt, tab
}
