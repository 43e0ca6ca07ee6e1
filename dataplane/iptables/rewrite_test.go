package iptables_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// foreign is what other software keeps in the tables we share.
var foreign = []string{
	"*nat\n:DOCKER - [0:0]\n-A DOCKER -d 172.17.0.2/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 172.17.0.2:80\n" +
		"-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\nCOMMIT\n",
	"*filter\n:FW-IN - [0:0]\n-A FW-IN -p tcp -m tcp --dport 22 -m comment --comment \"ssh in\" -j ACCEPT\n" +
		"-A INPUT -j FW-IN\n-A FORWARD -j DROP\nCOMMIT\n",
}

func fakeWithForeign(t *testing.T) *iptablestest.Fake {
	t.Helper()
	f := iptablestest.New()
	for _, in := range foreign {
		if err := f.Restore("iptables", in); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func nftV4(above int) func(*iptables.Config) {
	return func(c *iptables.Config) {
		c.Flavour = xtables.FlavourNFT
		c.Families = []dataplane.Family{dataplane.IPv4}
		c.RewriteTablesAbove = above
	}
}

func restoreArgv(f *iptablestest.Fake) [][]string {
	var out [][]string
	for _, c := range f.Calls() {
		if strings.HasSuffix(c.Argv[0], "-restore") {
			out = append(out, c.Argv)
		}
	}
	return out
}

func TestRewriteKeepsForeignRulesAndMatchesBatches(t *testing.T) {
	st := state(50)
	batched := fakeWithForeign(t)
	apply(t, newDP(t, batched, nftV4(-1)), st, false)
	for _, argv := range restoreArgv(batched) {
		if !slices.Contains(argv, "--noflush") {
			t.Fatalf("rewrite disabled but restore ran without --noflush: %v", argv)
		}
	}

	f := fakeWithForeign(t)
	before := f.Dump()
	d := newDP(t, f, nftV4(10))
	apply(t, d, st, false)
	argv := restoreArgv(f)
	if len(argv) != 1 || slices.Contains(argv[0], "--noflush") || !slices.Contains(argv[0], "-w") {
		t.Fatalf("want one restore -w without --noflush, got %v", argv)
	}
	if s := d.LastSync(); s.TableRewrites != 1 || s.Restores != 1 {
		t.Errorf("stats %+v, want 1 restore that rewrote tables", s)
	}
	if diff := cmp.Diff(batched.Dump(), f.Dump()); diff != "" {
		t.Errorf("rewrite differs from the batched --noflush path (-batched +rewrite):\n%s", diff)
	}
	// A second full sync of the same state writes nothing at all.
	f.ResetCalls()
	apply(t, d, st, true)
	if n := len(restoreArgv(f)); n != 0 {
		t.Errorf("full resync of an unchanged state ran %d restores", n)
	}
	if err := d.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, f.Dump()); diff != "" {
		t.Errorf("foreign rules not preserved (-before +after cleanup):\n%s", diff)
	}
}

func TestRewriteDropsStaleOwnedChainsAndTheirJumps(t *testing.T) {
	f := fakeWithForeign(t)
	stale := "*nat\n:KUBE-SVC-STALE - [0:0]\n-A KUBE-SVC-STALE -j RETURN\n-A OUTPUT -j KUBE-SVC-STALE\n-A DOCKER -j KUBE-SVC-STALE\nCOMMIT\n"
	if err := f.Restore("iptables", stale); err != nil {
		t.Fatal(err)
	}
	d := newDP(t, f, nftV4(10))
	apply(t, d, state(20), false)
	if d.LastSync().TableRewrites != 1 {
		t.Fatalf("stats %+v, want a table rewrite", d.LastSync())
	}
	want := fakeWithForeign(t)
	apply(t, newDP(t, want, nftV4(-1)), state(20), false)
	if diff := cmp.Diff(want.Dump(), f.Dump()); diff != "" {
		t.Errorf("stale chain or jumps left (-want +got):\n%s", diff)
	}
}

// opaqueSave adds the comment iptables-nft-save prints for a table it
// cannot list: such a read-back must not be written back whole.
type opaqueSave struct{ *iptablestest.Fake }

func (o opaqueSave) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	out, err := o.Fake.Run(ctx, argv, stdin)
	if strings.HasSuffix(argv[0], "-save") {
		out = append([]byte("# Table `nat' is incompatible, use 'nft' tool.\n"), out...)
	}
	return out, err
}

// halfRewrite makes the first restore without --noflush commit its filter
// table and fail on nat, as iptables-restore does when a later table's
// COMMIT is rejected.
type halfRewrite struct {
	*iptablestest.Fake
	failed bool
}

func (h *halfRewrite) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if h.failed || !strings.HasSuffix(argv[0], "-restore") || slices.Contains(argv, "--noflush") {
		return h.Fake.Run(ctx, argv, stdin)
	}
	h.failed = true
	filter, _, _ := strings.Cut(string(stdin), "*nat\n")
	if _, err := h.Fake.Run(ctx, argv, []byte(filter)); err != nil {
		return nil, err
	}
	return nil, errors.New("nat: COMMIT rejected")
}

func TestRewriteFallsBackToBatches(t *testing.T) {
	want := fakeWithForeign(t)
	apply(t, newDP(t, want, nftV4(-1)), state(30), false)

	t.Run("opaque read-back", func(t *testing.T) {
		f := fakeWithForeign(t)
		cfg := iptables.Config{Runner: opaqueSave{f}}
		nftV4(10)(&cfg)
		d, err := iptables.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		apply(t, d, state(30), false)
		if s := d.LastSync(); s.TableRewrites != 0 {
			t.Errorf("stats %+v: rewrote tables from an incompatible read-back", s)
		}
		if diff := cmp.Diff(want.Dump(), f.Dump()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("rewrite fails", func(t *testing.T) {
		f := fakeWithForeign(t)
		f.Fail = func(argv []string, _ []byte) error {
			if strings.HasSuffix(argv[0], "-restore") && !slices.Contains(argv, "--noflush") {
				return errors.New("rejected")
			}
			return nil
		}
		d := newDP(t, f, nftV4(10))
		apply(t, d, state(30), false)
		if s := d.LastSync(); s.TableRewrites != 0 || s.Restores == 0 {
			t.Errorf("stats %+v, want the batched path after the failed rewrite", s)
		}
		if diff := cmp.Diff(want.Dump(), f.Dump()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("rewrite commits one table then fails", func(t *testing.T) {
		f := fakeWithForeign(t)
		cfg := iptables.Config{Runner: &halfRewrite{Fake: f}}
		nftV4(10)(&cfg)
		d, err := iptables.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		apply(t, d, state(30), false)
		if diff := cmp.Diff(want.Dump(), f.Dump()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("legacy by default", func(t *testing.T) {
		f := fakeWithForeign(t)
		d := newDP(t, f, ipv4Only)
		apply(t, d, state(300), false)
		if s := d.LastSync(); s.TableRewrites != 0 {
			t.Errorf("stats %+v: legacy rewrote tables", s)
		}
	})
}

func TestPartialSyncNeverRewrites(t *testing.T) {
	f := fakeWithForeign(t)
	d := newDP(t, f, nftV4(1))
	apply(t, d, state(30), false)
	f.ResetCalls()
	apply(t, d, state(40), false) // 10 services more: a partial sync
	for _, argv := range restoreArgv(f) {
		if !slices.Contains(argv, "--noflush") {
			t.Errorf("partial sync ran a restore without --noflush: %v", argv)
		}
	}
}
