package peer_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/dataplane/kubeproxycleanup/kubeproxycleanuptest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/peer"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/syncer"
)

// healthz serves a kube-proxy-like /healthz, marked as this agent's when
// ours is set.
func healthz(t *testing.T, ours bool) string {
	t.Helper()
	return healthzAnswering(t, ours, http.StatusServiceUnavailable) // kube-proxy not synced yet still runs
}

func healthzAnswering(t *testing.T, ours bool, code int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if ours {
			w.Header().Set(health.AgentHeader, "1")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestLive(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedAddr := strings.TrimPrefix(closed.URL, "http://")
	closed.Close()
	tests := []struct {
		name string
		addr string
		want bool
	}{
		{"kube-proxy answers, even unhealthy", healthz(t, false), true},
		{"this agent answers: the port is ours", healthz(t, true), false},
		{"nothing listens", closedAddr, false},
		{"no address to probe", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, detail := peer.New(peer.Config{HealthzAddress: tc.addr}).Live(t.Context())
			if got != tc.want {
				t.Errorf("Live = %v (%s), want %v", got, detail, tc.want)
			}
		})
	}
}

// flavoured is a fake iptables dataplane that knows its back end.
type flavoured struct {
	*dataplanetest.Fake
	f xtables.Flavour
}

func (d flavoured) Flavour() xtables.Flavour { return d.f }

// errBackEnd marks the case that must fail without writing anything.
var errBackEnd = errors.New("back end unknown")

const kubeProxyMangle = "*mangle\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"

// TestAdopt: kube-proxy's leftovers go only while it does not run; in
// the iptables mode's own back end only its evidence goes, and a full
// sync is asked for; in the nftables mode everything of kube-proxy's
// goes and no sync is needed.
func TestAdopt(t *testing.T) {
	tests := []struct {
		name       string
		dp         dataplane.Dataplane
		live       bool
		wantErr    error
		wantResync bool
		wantWrites []string
	}{
		{name: "kube-proxy runs", dp: dataplanetest.New("nftables"), live: true, wantErr: peer.ErrLive},
		{name: "nftables mode: everything of kube-proxy's", dp: dataplanetest.New("nftables"),
			wantWrites: []string{"iptables-nft-restore -w --noflush", "nft delete table ip kube-proxy"}},
		{name: "iptables mode: its back end keeps the shared chains", dp: flavoured{dataplanetest.New("iptables"), xtables.FlavourNFT},
			wantResync: true, wantWrites: []string{"iptables-nft-restore -w --noflush", "nft delete table ip kube-proxy"}},
		{name: "an iptables mode that does not say its back end: nothing removed", dp: dataplanetest.New("iptables"),
			wantErr: errBackEnd},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &kubeproxycleanuptest.Script{Responses: map[string]kubeproxycleanuptest.Response{
				"iptables-nft-save":                 {Out: kubeProxyMangle},
				"iptables-nft-restore -w --noflush": {},
				"nft list tables":                   {Out: "table ip kube-proxy\n"},
				"nft delete table ip kube-proxy":    {},
			}}
			addr := ""
			if tc.live {
				addr = healthz(t, false)
			}
			resync, err := peer.New(peer.Config{HealthzAddress: addr, Runner: s}).Adopt(t.Context(), tc.dp)
			if tc.wantErr == errBackEnd {
				if err == nil || len(s.Writes()) > 0 {
					t.Fatalf("Adopt error %v, writes %v: want an error and nothing written", err, s.Writes())
				}
				return
			}
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Adopt error %v, want %v", err, tc.wantErr)
			}
			if resync != tc.wantResync {
				t.Errorf("resync %v, want %v", resync, tc.wantResync)
			}
			var writes []string
			for _, c := range s.Writes() {
				writes = append(writes, c.Argv)
			}
			slices.Sort(writes)
			if d := cmp.Diff(tc.wantWrites, writes); d != "" {
				t.Errorf("writes (-want +got):\n%s", d)
			}
		})
	}
}

var _ syncer.Peer = (*peer.KubeProxy)(nil)

// TestHealthy: kube-proxy has the node once its /healthz says 200 and, in
// the iptables mode, its sync rewrote KUBE-SERVICES over this agent's
// (which jumped to KUBE-SHARD-*): kube-proxy says 200 before its first
// sync too.
func TestHealthy(t *testing.T) {
	ours := "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SHARD-0A - [0:0]\n-A KUBE-SERVICES -d 0.0.0.10/0.0.0.63 -j KUBE-SHARD-0A\nCOMMIT\n"
	theirs := "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SHARD-0A - [0:0]\n-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -j KUBE-SVC-TCOU7JCQXEZGVUNU\nCOMMIT\n"
	tests := []struct {
		name string
		code int
		dp   dataplane.Dataplane
		nat  string
		nft  *kubeproxycleanuptest.Response // kube-proxy's IPv4 service map; nil: no table
		want bool
	}{
		{name: "not synced: 503", code: http.StatusServiceUnavailable, dp: dataplanetest.New("nftables"), want: false},
		{name: "nftables mode: 200", code: http.StatusOK, dp: dataplanetest.New("nftables"), want: true},
		{name: "iptables mode: 200, KUBE-SERVICES still ours", code: http.StatusOK, dp: flavoured{dataplanetest.New("iptables"), xtables.FlavourNFT}, nat: ours, want: false},
		{name: "iptables mode: 200, KUBE-SERVICES kube-proxy's", code: http.StatusOK, dp: flavoured{dataplanetest.New("iptables"), xtables.FlavourNFT}, nat: theirs, want: true},
		// kube-proxy's nftables mode never rewrites KUBE-SERVICES: its own
		// table tells when it synced.
		{name: "iptables mode: 200, kube-proxy's nftables map empty", code: http.StatusOK, dp: flavoured{dataplanetest.New("iptables"), xtables.FlavourNFT}, nat: ours,
			nft: &kubeproxycleanuptest.Response{Out: "table ip kube-proxy {\n\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t}\n}\n"}, want: false},
		{name: "iptables mode: 200, kube-proxy's nftables map filled", code: http.StatusOK, dp: flavoured{dataplanetest.New("iptables"), xtables.FlavourNFT}, nat: ours,
			nft: &kubeproxycleanuptest.Response{Out: "table ip kube-proxy {\n\tmap service-ips {\n\t\ttype ipv4_addr . inet_proto . inet_service : verdict\n\t\telements = { 10.96.0.1 . tcp . 443 : goto service-2QRHZV4L-default/kubernetes/tcp/https }\n\t}\n}\n"}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &kubeproxycleanuptest.Script{Responses: map[string]kubeproxycleanuptest.Response{
				"iptables-nft-save -t nat":  {Out: tc.nat},
				"ip6tables-nft-save -t nat": {Out: "*nat\nCOMMIT\n"},
			}}
			if tc.nft != nil {
				s.Responses["nft list map ip kube-proxy service-ips"] = *tc.nft
			}
			kp := peer.New(peer.Config{HealthzAddress: healthzAnswering(t, false, tc.code), Runner: s})
			if got, detail := kp.Healthy(t.Context(), tc.dp); got != tc.want {
				t.Errorf("Healthy = %v (%s), want %v", got, detail, tc.want)
			}
		})
	}
}

// kubeProxyIPVS is `ipvsadm -L -n` of kube-proxy's ipvs mode with conns
// connections on its cluster IP (bound to kube-ipvs0).
func kubeProxyIPVS(conns int) string {
	return fmt.Sprintf("IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n"+
		"TCP  10.96.0.1:443 rr\n  -> 172.18.0.2:6443   Masq    1      0          %d\n", conns)
}

// TestAdoptDrainsKubeProxysIPVS: while kube-proxy's IPVS virtual
// servers carry connections, Adopt removes nothing (ErrDraining, one
// message for the whole drain); once they are gone, or MaxDrain passed
// since they were first seen, everything of kube-proxy's goes.
func TestAdoptDrainsKubeProxysIPVS(t *testing.T) {
	type step struct {
		advance time.Duration
		conns   int
		drain   bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{name: "until drained", steps: []step{{0, 7, true}, {time.Minute, 2, true}, {time.Second, 0, false}}},
		{name: "until the bound", steps: []step{{0, 7, true}, {9 * time.Minute, 7, true}, {time.Minute, 7, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &kubeproxycleanuptest.Script{Responses: map[string]kubeproxycleanuptest.Response{
				"iptables-nft-save":                 {Out: kubeProxyMangle},
				"iptables-nft-restore -w --noflush": {},
				"ip -o addr show dev kube-ipvs0":    {Out: "9: kube-ipvs0    inet 10.96.0.1/32 scope global kube-ipvs0\n"},
				"ipvsadm -D -t 10.96.0.1:443":       {},
				"ip link del kube-ipvs0":            {},
			}}
			now := time.Unix(1000, 0)
			k := peer.New(peer.Config{Runner: s, MaxDrain: 10 * time.Minute, Now: func() time.Time { return now }})
			var msgs []string
			for i, st := range tc.steps {
				now = now.Add(st.advance)
				s.Responses["ipvsadm -L -n"] = kubeproxycleanuptest.Response{Out: kubeProxyIPVS(st.conns)}
				_, err := k.Adopt(t.Context(), dataplanetest.New("nftables"))
				if got := errors.Is(err, dataplane.ErrDraining); got != st.drain {
					t.Fatalf("step %d: ErrDraining %v, want %v (err %v)", i, got, st.drain, err)
				}
				if st.drain {
					msgs = append(msgs, err.Error())
					if w := s.Writes(); len(w) > 0 {
						t.Fatalf("step %d: wrote %v while draining", i, w)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if w := s.Writes(); len(w) != 3 {
					t.Errorf("step %d: writes %v, want kube-proxy's chains, virtual server and link removed", i, w)
				}
			}
			if got := slices.Compact(msgs); len(got) != 1 {
				t.Errorf("draining errors %q: want one message for the whole drain", msgs)
			}
		})
	}
}
