package ipvstest_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
)

// traceRules are the few rules the cases need, in the ipvs mode's
// shape: marks in nat from sets, refusals in filter INPUT, masquerade in
// POSTROUTING.
const traceRules = `*nat
:SVC - [0:0]
:POST - [0:0]
-A PREROUTING -j SVC
-A OUTPUT -j SVC
-A POSTROUTING -j POST
-A SVC -m set --match-set CLUSTER-IP dst,dst -m set ! --match-set CLUSTER-CIDR src -j MARK --set-xmark 0x4000/0x4000
-A POST -m mark ! --mark 0x4000/0x4000 -j RETURN
-A POST -j MASQUERADE
COMMIT
*filter
:IN - [0:0]
-A INPUT -j IN
-A IN -p tcp -m conntrack --ctstate NEW -m set --match-set REJECT dst,dst -j REJECT --reject-with tcp-reset
COMMIT
`

var (
	nodeIP = netip.MustParseAddr("10.200.0.10")
	ep1    = netip.MustParseAddrPort("10.244.0.1:8080")
	ep2    = netip.MustParseAddrPort("10.244.0.2:8080")
	ep3    = netip.MustParseAddrPort("10.244.0.3:8080")
)

func vs(addr string, timeout uint32) ipvs.VirtualServer {
	return ipvs.VirtualServer{Key: ipvs.VSKey{Addr: netip.MustParseAddr(addr), Port: 80, Protocol: dataplane.TCP}, Scheduler: "rr", Timeout: timeout}
}

func rs(ep netip.AddrPort, w int) ipvs.RealServer { return ipvs.RealServer{Addr: ep, Weight: w} }

// traceFake holds traceRules, the sets they match and kube-ipvs0 with the
// service addresses 10.96.0.1-4.
func traceFake(t *testing.T) *ipvstest.Fake {
	t.Helper()
	f := ipvstest.New()
	f.AddForeignSet("CLUSTER-IP", "hash:ip,port", "inet", "10.96.0.1,tcp:80")
	f.AddForeignSet("CLUSTER-CIDR", "hash:net", "inet", "10.244.0.0/16")
	f.AddForeignSet("REJECT", "hash:ip,port", "inet", "10.96.0.4,tcp:80")
	if err := f.IPTables().Restore("iptables", traceRules); err != nil {
		t.Fatal(err)
	}
	if err := f.EnsureDummy(t.Context(), ipvs.DummyInterface); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.96.0.1", "10.96.0.2", "10.96.0.3", "10.96.0.4"} {
		if err := f.AddAddress(t.Context(), ipvs.DummyInterface, netip.MustParseAddr(a)); err != nil {
			t.Fatal(err)
		}
	}
	f.AddForeign(vs("10.96.0.1", 0), rs(ep1, 1), rs(ep2, 1), rs(ep3, 0))
	f.AddForeign(vs("10.96.0.2", 10800), rs(ep1, 2), rs(ep2, 1))
	f.AddForeign(vs("10.96.0.3", 0), rs(ep1, 0))
	return f
}

func TestTrace(t *testing.T) {
	shares := func(s ...explain.Share) []explain.Share { return s }
	cases := []struct {
		name, packet string
		want         explain.Verdict
	}{{
		name: "real servers of weight 0 get nothing", packet: "tcp 10.244.0.9 -> 10.96.0.1:80",
		want: explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(ep1, ep2)},
	}, {
		name: "an off-cluster client is marked and masqueraded", packet: "tcp 192.0.2.50 -> 10.96.0.1:80",
		want: explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(ep1, ep2), Masquerade: true},
	}, {
		name: "the node's own packet meets IPVS at LOCAL_OUT", packet: "tcp 10.200.0.10 -> 10.96.0.1:80",
		want: explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(ep1, ep2), Masquerade: true},
	}, {
		name: "shares follow weights; persistence is affinity", packet: "tcp 10.244.0.9 -> 10.96.0.2:80",
		want: explain.Verdict{Action: explain.Forward, AffinitySeconds: 10800,
			Endpoints: shares(explain.Share{Endpoint: ep1, Share: 2.0 / 3}, explain.Share{Endpoint: ep2, Share: 1.0 / 3})},
	}, {
		name: "a virtual server with only drained real servers refuses", packet: "tcp 10.244.0.9 -> 10.96.0.3:80",
		want: explain.Verdict{Action: explain.Reject},
	}, {
		name: "filter INPUT comes before IPVS", packet: "tcp 10.244.0.9 -> 10.96.0.4:80",
		want: explain.Verdict{Action: explain.Reject},
	}, {
		name: "the node's own packet reaches filter INPUT over loopback", packet: "tcp 10.200.0.10 -> 10.96.0.4:80",
		want: explain.Verdict{Action: explain.Reject},
	}, {
		name: "a local address without a virtual server is the node's", packet: "tcp 10.244.0.9 -> 10.96.0.1:81",
		want: explain.Verdict{Action: explain.Pass},
	}, {
		name: "an address that is not local is routed", packet: "tcp 10.244.0.9 -> 10.96.0.9:80",
		want: explain.Verdict{Action: explain.Pass},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pkt, err := explain.ParsePacket(tc.packet)
			if err != nil {
				t.Fatal(err)
			}
			got, err := traceFake(t).Trace(pkt, []netip.Addr{nodeIP})
			if err != nil {
				t.Fatal(err)
			}
			if d := explain.Diff(tc.want, got); len(d) > 0 {
				t.Errorf("%s\n  got: %s\n  path: %s", strings.Join(d, "; "), got, strings.Join(got.Path, " > "))
			}
		})
	}
}

// TestTraceUnknownRule: the rules are walked with iptablestest's engine,
// which refuses what it does not understand.
func TestTraceUnknownRule(t *testing.T) {
	f := traceFake(t)
	if err := f.IPTables().Insert("iptables", "filter", "IN", "-m multiport --dports 80,81 -j ACCEPT"); err != nil {
		t.Fatal(err)
	}
	pkt, err := explain.ParsePacket("tcp 10.244.0.9 -> 10.96.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Trace(pkt, []netip.Addr{nodeIP}); err == nil || !strings.Contains(err.Error(), "multiport") {
		t.Fatalf("got %v, want an error naming the match", err)
	}
}
