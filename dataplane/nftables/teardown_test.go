package nftables

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
)

// TestCleanupOfAnEarlierProcess: a Dataplane that never applied (an agent
// restarted in another mode, or --cleanup) deletes the tables an earlier
// one left.
func TestCleanupOfAnEarlierProcess(t *testing.T) {
	b := newFakeBed(t, dataplane.IPv4, dataplane.IPv6)
	b.apply(t, dataplanetest.LoadState(t, "dual-stack"), false)
	ifs := map[dataplane.Family]knftables.Interface{dataplane.IPv4: b.fakes[dataplane.IPv4], dataplane.IPv6: b.fakes[dataplane.IPv6]}
	fresh, err := New(Config{Interfaces: ifs, Families: []dataplane.Family{dataplane.IPv4, dataplane.IPv6}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fresh.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	for f, fake := range b.fakes {
		if d := fake.Dump(); d != "" {
			t.Errorf("%s: table left:\n%s", f, d)
		}
	}
}

// TestCleanupRunsNFT: what Cleanup asks nft, and which failures count.
func TestCleanupRunsNFT(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{name: "deletes both tables, present or not"},
		{name: "no nft binary: nothing of ours can exist", err: exec.ErrNotFound},
		{name: "nft fails", err: errors.New("exit status 1: Operation not permitted"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &scriptRunner{err: tc.err}
			d, err := New(Config{Runner: r})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Cleanup(t.Context())
			if (err != nil) != tc.wantErr {
				t.Fatalf("Cleanup = %v, want error: %t", err, tc.wantErr)
			}
			want := []string{
				"nft -f -\nadd table ip switchyard\ndelete table ip switchyard\n",
				"nft -f -\nadd table ip6 switchyard\ndelete table ip6 switchyard\n",
			}
			if d := cmp.Diff(want, r.calls); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
}
