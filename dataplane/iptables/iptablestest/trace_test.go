package iptablestest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// natBase is the frame of every case: the built-in chains enter
// KUBE-SERVICES and KUBE-POSTROUTING, which masquerades marked packets
// and, before that, hairpin ones (an endpoint reaching itself).
const natBase = `:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A PREROUTING -m comment --comment "service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "service portals" -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m set --match-set HAIRPIN src,dst,dst -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
`

// svc3 balances 10.96.0.10:80 over three endpoints, marking clients
// from outside 10.244.0.0/16.
const svc3 = `:SVC - [0:0]
-A KUBE-SERVICES -d 0.0.0.10/0.0.0.63 -j SHARD
:SHARD - [0:0]
-A SHARD -p tcp -m tcp -d 10.96.0.10 --dport 80 -j SVC
-A SVC -p tcp -m tcp ! -s 10.244.0.0/16 -d 10.96.0.10 --dport 80 -j KUBE-MARK-MASQ
-A SVC -p tcp -m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination 10.244.0.1:8080
-A SVC -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.244.0.2:8080
-A SVC -p tcp -j DNAT --to-destination 10.244.0.3:8080
`

var (
	nodeIP = netip.MustParseAddr("10.200.0.10")
	ep1    = netip.MustParseAddrPort("10.244.0.1:8080")
	ep2    = netip.MustParseAddrPort("10.244.0.2:8080")
	ep3    = netip.MustParseAddrPort("10.244.0.3:8080")
)

type traceCase struct {
	name        string
	nat, filter string // rules after natBase and in filter
	hairpin     []string
	packet      string
	want        explain.Verdict
	wantNote    string
	wantErr     string
}

// newTraceFake restores a case's rules into a Fake, for IPv6 when the
// packet is.
func newTraceFake(t *testing.T, tc traceCase, v6 bool) *Fake {
	t.Helper()
	f := New()
	fam, setFam := "iptables", "inet"
	if v6 {
		fam, setFam = "ip6tables", "inet6"
	}
	f.AddSet("HAIRPIN", "hash:ip,port,ip", setFam, tc.hairpin...)
	in := "*nat\n" + natBase + tc.nat + "COMMIT\n*filter\n" + tc.filter + "COMMIT\n"
	if err := f.Restore(fam, in); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return f
}

func runTraceCases(t *testing.T, cases []traceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pkt, err := explain.ParsePacket(tc.packet)
			if err != nil {
				t.Fatal(err)
			}
			f := newTraceFake(t, tc, pkt.IPv6())
			got, err := f.Trace(pkt, []netip.Addr{nodeIP, netip.MustParseAddr("fd00::10")})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := explain.Diff(tc.want, got); len(d) > 0 {
				t.Errorf("%s\n  got: %s\n  path: %s", strings.Join(d, "; "), got, strings.Join(got.Path, " > "))
			}
			if tc.wantNote != "" && !strings.Contains(strings.Join(got.Notes, "\n"), tc.wantNote) {
				t.Errorf("notes %q lack %q", got.Notes, tc.wantNote)
			}
		})
	}
}

func forward(masq bool, aff uint32, eps ...netip.AddrPort) explain.Verdict {
	return explain.Verdict{Action: explain.Forward, Endpoints: explain.Even(eps...), Masquerade: masq, AffinitySeconds: aff}
}

func TestTraceBalancing(t *testing.T) {
	runTraceCases(t, []traceCase{{
		name: "shares are the products of the probabilities", nat: svc3,
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", want: forward(false, 0, ep1, ep2, ep3),
	}, {
		name: "a client outside the cluster is marked and masqueraded", nat: svc3,
		packet: "tcp 192.0.2.50 -> 10.96.0.10:80", want: forward(true, 0, ep1, ep2, ep3),
	}, {
		name: "the node's own packet takes nat OUTPUT", nat: svc3,
		packet: "tcp 10.200.0.10 -> 10.96.0.10:80", want: forward(true, 0, ep1, ep2, ep3),
	}, {
		name: "another shard, another port: not a service", nat: svc3,
		packet: "tcp 10.244.0.9 -> 10.96.0.11:80", want: explain.Verdict{Action: explain.Pass},
	}, {
		name: "hairpin masquerade is not reported",
		nat: `:SVC - [0:0]
-A KUBE-SERVICES -p tcp -m tcp -d 10.96.0.10 --dport 80 -j SVC
-A SVC -p tcp -j DNAT --to-destination 10.244.0.1:8080
`,
		hairpin: []string{"10.244.0.1,tcp:8080,10.244.0.1"},
		packet:  "tcp 10.244.0.1 -> 10.96.0.10:80", want: forward(false, 0, ep1),
		wantNote: "hairpin",
	}, {
		name: "affinity: the rcheck never matches a first packet, its seconds count",
		nat: `:SVC - [0:0]
:SEP1 - [0:0]
:SEP2 - [0:0]
-A KUBE-SERVICES -p tcp -m tcp -d 10.96.0.10 --dport 80 -j SVC
-A SVC -m recent --name SEP1 --rcheck --seconds 10800 --reap -j SEP1
-A SVC -m recent --name SEP2 --rcheck --seconds 10800 --reap -j SEP2
-A SVC -m statistic --mode random --probability 0.5000000000 -j SEP1
-A SVC -j SEP2
-A SEP1 -p tcp -m tcp -m recent --name SEP1 --set -j DNAT --to-destination 10.244.0.1:8080
-A SEP2 -p tcp -m tcp -m recent --name SEP2 --set -j DNAT --to-destination 10.244.0.2:8080
`,
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", want: forward(false, 10800, ep1, ep2),
	}, {
		name: "IPv6 shard mask",
		nat: `:SVC - [0:0]
-A KUBE-SERVICES -d ::a/::3f -j SVC
-A SVC -p tcp -m tcp -d fd00::a --dport 80 -j DNAT --to-destination [fd00:244::1]:8080
`,
		packet: "tcp fd00:244::9 -> [fd00::a]:80",
		want:   forward(false, 0, netip.MustParseAddrPort("[fd00:244::1]:8080")),
	}})
}

// nodePorts enters KUBE-NODEPORTS on local addresses but loopback.
const nodePorts = `:KUBE-NODEPORTS - [0:0]
:EXT - [0:0]
-A KUBE-SERVICES -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j EXT
-A EXT -j KUBE-MARK-MASQ
-A EXT -p tcp -j DNAT --to-destination 10.244.0.1:8080
`

func TestTraceFilterAndLocal(t *testing.T) {
	runTraceCases(t, []traceCase{{
		name: "node port on a node IP", nat: nodePorts,
		packet: "tcp 192.0.2.50 -> 10.200.0.10:30080", want: forward(true, 0, ep1),
	}, {
		name: "node port not on loopback", nat: nodePorts,
		packet: "tcp 127.0.0.1 -> 127.0.0.1:30080", want: explain.Verdict{Action: explain.Pass},
	}, {
		name:   "filter FORWARD rejects a pod's packet",
		filter: ":KUBE-SERVICES - [0:0]\n-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES\n-A KUBE-SERVICES -p tcp -m tcp -d 10.96.0.10 --dport 80 -j REJECT --reject-with tcp-reset\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", want: explain.Verdict{Action: explain.Reject},
	}, {
		name:   "filter OUTPUT rejects the node's packet",
		filter: ":KUBE-SERVICES - [0:0]\n-A OUTPUT -m conntrack --ctstate NEW -j KUBE-SERVICES\n-A KUBE-SERVICES -p tcp -m tcp -d 10.96.0.10 --dport 80 -j REJECT\n",
		packet: "tcp 10.200.0.10 -> 10.96.0.10:80", want: explain.Verdict{Action: explain.Reject},
	}, {
		name:   "filter INPUT drops for a local destination",
		filter: ":EXT - [0:0]\n-A INPUT -j EXT\n-A EXT -m addrtype --dst-type LOCAL -p tcp -m tcp --dport 30080 -j DROP\n",
		packet: "tcp 192.0.2.50 -> 10.200.0.10:30080", want: explain.Verdict{Action: explain.Drop},
	}, {
		name:   "a marked packet is accepted before a later REJECT",
		nat:    svc3,
		filter: ":FWD - [0:0]\n-A FORWARD -j FWD\n-A FWD -m conntrack --ctstate INVALID -j DROP\n-A FWD -m mark --mark 0x4000/0x4000 -j ACCEPT\n-A FORWARD -j REJECT\n",
		packet: "tcp 192.0.2.50 -> 10.96.0.10:80", want: forward(true, 0, ep1, ep2, ep3),
	}, {
		name: "-g returns past the rule that went there",
		nat: `:A - [0:0]
:B - [0:0]
-A KUBE-SERVICES -j A
-A KUBE-SERVICES -p tcp -j DNAT --to-destination 10.244.0.2:8080
-A A -g B
-A A -p tcp -j DNAT --to-destination 10.244.0.1:8080
`,
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", want: forward(false, 0, ep2),
	}})
}

func TestTraceErrors(t *testing.T) {
	runTraceCases(t, []traceCase{{
		name: "unknown match", nat: "-A KUBE-SERVICES -p tcp -m multiport --dports 80,81 -j ACCEPT\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", wantErr: "-m multiport",
	}, {
		name: "source port", nat: "-A KUBE-SERVICES -p tcp -m tcp --sport 80 -j ACCEPT\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", wantErr: "--sport",
	}, {
		name: "unknown target", nat: "-A KUBE-SERVICES -p tcp -j SNAT --to-source 10.0.0.1\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", wantErr: "SNAT",
	}, {
		name: "missing set", nat: "-A KUBE-SERVICES -m set --match-set NOPE dst -j ACCEPT\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", wantErr: "NOPE",
	}, {
		name: "a set's source port", nat: "-A KUBE-SERVICES -m set --match-set HAIRPIN src,src,dst -j ACCEPT\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", hairpin: []string{"10.244.0.9,tcp:80,10.96.0.10"},
		wantErr: "source port",
	}, {
		name:   "branches that end apart",
		nat:    "-A KUBE-SERVICES -p tcp -m statistic --mode random --probability 0.5 -j DNAT --to-destination 10.244.0.1:8080\n",
		packet: "tcp 10.244.0.9 -> 10.96.0.10:80", wantErr: "branches end in",
	}})
}

// TestEveryOptionHasItsMatch: an option the parser accepts belongs to a
// match whose options it can read, so option never looks up a missing
// reader.
func TestEveryOptionHasItsMatch(t *testing.T) {
	for opt, m := range optionMatch {
		if matchOptions[m] == nil {
			t.Errorf("option %s: match %q has no reader in matchOptions", opt, m)
		}
	}
}
