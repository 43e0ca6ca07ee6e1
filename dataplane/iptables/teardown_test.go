package iptables_test

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// backends is a namespace with the two iptables back ends apart, as in
// the kernel: the *-legacy-* binaries reach one fake, the *-nft-* ones
// the other, and ipset (one list per namespace) the nft fake.
type backends struct {
	legacy, nft *iptablestest.Fake
}

func newBackends() *backends { return &backends{legacy: iptablestest.New(), nft: iptablestest.New()} }

func (b *backends) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if strings.Contains(argv[0], "-legacy-") {
		return b.legacy.Run(ctx, argv, stdin)
	}
	return b.nft.Run(ctx, argv, stdin)
}

// dump prints both back ends; it reads every family first, so a family
// the fake has not seen yet prints as empty instead of missing.
func (b *backends) dump(t *testing.T) string {
	t.Helper()
	for _, argv := range []string{"iptables-legacy-save", "ip6tables-legacy-save", "iptables-nft-save", "ip6tables-nft-save"} {
		if _, err := b.Run(t.Context(), []string{argv}, nil); err != nil {
			t.Fatal(err)
		}
	}
	return "# legacy\n" + tables(b.legacy.Dump()) + "# nft\n" + b.nft.Dump()
}

func (b *backends) restores() []string {
	var out []string
	for _, f := range []*iptablestest.Fake{b.legacy, b.nft} {
		for _, c := range f.Calls() {
			if strings.HasSuffix(c.Argv[0], "-restore") {
				out = append(out, strings.Join(c.Argv, " "))
			}
		}
	}
	return out
}

// program applies state(n) with a Dataplane of flavour fl, as an earlier
// agent process did.
func (b *backends) program(t *testing.T, fl xtables.Flavour, n int) {
	t.Helper()
	d, err := iptables.New(iptables.Config{Runner: b, Flavour: fl})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, d, state(n), false)
}

func (b *backends) restore(t *testing.T, f *iptablestest.Fake, fam, input string) {
	t.Helper()
	if err := f.Restore(fam, input); err != nil {
		t.Fatal(err)
	}
}

const (
	foreignNAT    = "*nat\n:DOCKER - [0:0]\n-A DOCKER -d 172.17.0.2 -j DNAT --to-destination 172.17.0.2:80\n-A PREROUTING -j DOCKER\nCOMMIT\n"
	foreignFilter = "*filter\n-A INPUT -p tcp --dport 22 -j ACCEPT\nCOMMIT\n"
	// A CNI plugin's chain marking for masquerade through our chain.
	foreignMarkMasq = "*nat\n:CNI-HOSTPORT-MASQ - [0:0]\n-A CNI-HOSTPORT-MASQ -m mark --mark 0x2000/0x2000 -j KUBE-MARK-MASQ\n-A POSTROUTING -j CNI-HOSTPORT-MASQ\nCOMMIT\n"
	canary          = "*nat\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"
	// kubeProxyJump is kube-proxy's iptables mode's jump into the chain it
	// shares with this mode.
	kubeProxyJump = "*nat\n-I PREROUTING 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n"
)

// TestCleanupLeftovers: a fresh Dataplane (a restarted agent in another
// mode, or --cleanup) removes what an earlier process programmed, in
// whichever back end it is, and leaves every foreign rule.
func TestCleanupLeftovers(t *testing.T) {
	tests := []struct {
		name string
		// foreign writes other software's rules (nil: none); Cleanup must
		// return the namespace to that state (unless check is set).
		foreign func(t *testing.T, b *backends)
		// setup then programs ours, as an earlier agent did (nil: nothing).
		setup func(t *testing.T, b *backends)
		// check inspects the dump after Cleanup instead of comparing it
		// with the foreign state.
		check        func(t *testing.T, dump string)
		wantRestores []string
	}{
		{
			name:    "nothing of ours: only reads",
			foreign: func(t *testing.T, b *backends) { b.restore(t, b.nft, "iptables", foreignNAT) },
		},
		{
			name:         "nft leftovers",
			foreign:      func(t *testing.T, b *backends) { b.restore(t, b.nft, "iptables", foreignNAT+foreignFilter) },
			setup:        func(t *testing.T, b *backends) { b.program(t, xtables.FlavourNFT, 5) },
			wantRestores: []string{"iptables-nft-restore -w --noflush", "ip6tables-nft-restore -w --noflush"},
		},
		{
			name: "legacy leftovers while nft holds foreign rules",
			foreign: func(t *testing.T, b *backends) {
				b.restore(t, b.nft, "iptables", foreignNAT)
				b.restore(t, b.legacy, "iptables", foreignFilter)
			},
			setup:        func(t *testing.T, b *backends) { b.program(t, xtables.FlavourLegacy, 5) },
			wantRestores: []string{"iptables-legacy-restore -w --noflush", "ip6tables-legacy-restore -w --noflush"},
		},
		{
			name: "both back ends",
			setup: func(t *testing.T, b *backends) {
				b.program(t, xtables.FlavourLegacy, 3)
				b.program(t, xtables.FlavourNFT, 4)
			},
			wantRestores: []string{
				"iptables-legacy-restore -w --noflush", "ip6tables-legacy-restore -w --noflush",
				"iptables-nft-restore -w --noflush", "ip6tables-nft-restore -w --noflush",
			},
		},
		{
			name: "a foreign jump keeps its target, emptied",
			setup: func(t *testing.T, b *backends) {
				b.program(t, xtables.FlavourNFT, 2)
				b.restore(t, b.nft, "iptables", foreignMarkMasq)
			},
			check: func(t *testing.T, dump string) {
				// What must be left: the foreign rules, their target empty.
				want := newBackends()
				want.restore(t, want.nft, "iptables", "*nat\n:KUBE-MARK-MASQ - [0:0]\nCOMMIT\n"+foreignMarkMasq)
				if diff := cmp.Diff(want.dump(t), dump); diff != "" {
					t.Errorf("after cleanup (-want +got):\n%s", diff)
				}
			},
			wantRestores: []string{"iptables-nft-restore -w --noflush", "ip6tables-nft-restore -w --noflush"},
		},
		{
			name: "kube-proxy's canary: only the chains kube-proxy never names go",
			setup: func(t *testing.T, b *backends) {
				b.program(t, xtables.FlavourNFT, 3)
				b.restore(t, b.nft, "iptables", canary)
				b.restore(t, b.nft, "iptables", kubeProxyJump)
			},
			check: func(t *testing.T, dump string) {
				v4 := dump[strings.Index(dump, "# iptables\n"):]
				// kube-proxy's own jump stays beside the chain; ours goes.
				if !strings.Contains(v4, `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`) {
					t.Errorf("IPv4 lost kube-proxy's jump:\n%s", v4)
				}
				if strings.Contains(v4, `switchyard: `) {
					t.Errorf("IPv4 still has our jumps:\n%s", v4)
				}
				for _, gone := range []string{"KUBE-SHARD-", "KUBE-MASQ-OFFCLUSTER", "KUBE-SWYD-HAIRPIN "} {
					if strings.Contains(v4, gone) {
						t.Errorf("IPv4 still has %s:\n%s", gone, v4)
					}
				}
				for _, kept := range []string{":KUBE-SERVICES", ":KUBE-SVC-", ":KUBE-POSTROUTING", ":KUBE-PROXY-CANARY", "-j KUBE-SERVICES"} {
					if !strings.Contains(v4, kept) {
						t.Errorf("IPv4 lost %s (may be kube-proxy's):\n%s", kept, v4)
					}
				}
				// IPv6 has no canary: everything of ours goes there.
				v6 := dump[strings.Index(dump, "# ip6tables\n"):strings.Index(dump, "# iptables\n")]
				if strings.Contains(v6, "KUBE-") {
					t.Errorf("IPv6 still has our chains:\n%s", v6)
				}
			},
			wantRestores: []string{"iptables-nft-restore -w --noflush", "ip6tables-nft-restore -w --noflush"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackends()
			if tc.foreign != nil {
				tc.foreign(t, b)
			}
			before := b.dump(t)
			if tc.setup != nil {
				tc.setup(t, b)
			}
			b.legacy.ResetCalls()
			b.nft.ResetCalls()
			d, err := iptables.New(iptables.Config{Runner: b}) // FlavourAuto: never applied
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Cleanup(t.Context()); err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if tc.check != nil {
				tc.check(t, b.dump(t))
			} else if diff := cmp.Diff(before, b.dump(t)); diff != "" {
				t.Errorf("cleanup left or removed something (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRestores, b.restores()); diff != "" {
				t.Errorf("restores (-want +got):\n%s", diff)
			}
			// A second Cleanup finds nothing to do.
			b.legacy.ResetCalls()
			b.nft.ResetCalls()
			if err := d.Cleanup(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := b.restores(); len(got) != 0 {
				t.Errorf("second Cleanup ran %v", got)
			}
		})
	}
}

// errRunner fails every command as fail says.
type errRunner func(argv []string) error

func (r errRunner) Run(_ context.Context, argv []string, _ []byte) ([]byte, error) {
	return nil, r(argv)
}

func TestCleanupUnreadable(t *testing.T) {
	boom := errors.New("exit status 1: can't initialize iptables table")
	tests := []struct {
		name    string
		fail    func(argv []string) error
		wantErr string
	}{
		{name: "no iptables or ipset binary: nothing of ours can exist", fail: func([]string) error { return exec.ErrNotFound }},
		{name: "one back end missing from the kernel", fail: func(argv []string) error {
			if strings.Contains(argv[0], "-legacy-") {
				return boom
			}
			if slices.Contains([]string{"iptables-nft-save", "ip6tables-nft-save"}, argv[0]) {
				return nil
			}
			return exec.ErrNotFound
		}},
		{name: "nothing answers", fail: func([]string) error { return boom }, wantErr: "no iptables back end readable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := iptables.New(iptables.Config{Runner: errRunner(tc.fail)})
			if err != nil {
				t.Fatal(err)
			}
			err = d.Cleanup(t.Context())
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Cleanup = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
