package nftables

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/traffic"
)

// flowMeasureEnv turns TestFlowtableMeasure on; its value is the
// number of rounds (each setting measured once per round, alternating).
const flowMeasureEnv = "SWITCHYARD_FLOWTABLE_MEASURE"

// flowMeasure is one setting's numbers in one round.
type flowMeasure struct {
	Flowtable bool `json:"flowtable"`
	Round     int  `json:"round"`
	// Bulk: one connection through the Service VIP, 5 s of writes.
	BulkMbps float64 `json:"bulkMbps"`
	// Connect: connect() times to the VIP (SYN to SYN-ACK: never
	// offloaded, the control).
	Connect traffic.Latency `json:"connect"`
	// RTT: one-byte round trips over one established connection through
	// the VIP: the per-packet cost the fast path removes.
	RTTP50 float64 `json:"rttP50Micros"`
	RTTP99 float64 `json:"rttP99Micros"`
}

// TestFlowtableMeasure measures a Service's data path with and without
// the flowtable: bulk throughput over one connection, connect p99 and
// established-connection round-trip p50/p99 (client namespace → node
// namespace's nftables DNAT → pod namespace). Opt-in, in the QEMU guest:
//
//	SWITCHYARD_QEMU_ENV=SWITCHYARD_FLOWTABLE_MEASURE=3 flock /tmp/switchyard-qemu.lock \
//	  hack/qemu-kernel.sh run nftables.test -test.run TestFlowtableMeasure -test.v
//
// It prints one JSON line per setting and round ("flowtable-measure ").
func TestFlowtableMeasure(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv(flowMeasureEnv))
	if rounds <= 0 {
		t.Skipf("set %s=<rounds> to measure", flowMeasureEnv)
	}
	b := newBedFor(t, dataplane.IPv4, true)
	requireFlowtables(t, b)
	links := nodeLinks(t, b)
	pod := b.Pods[0]
	sink, err := traffic.StartSink(b.Topo, pod.NS, ":9100")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	pingServer(t, b.Topo, pod)
	vip := netip.AddrPortFrom(dptest.ServiceIP(dataplane.IPv4, 40), 80)
	pingVIP := netip.AddrPortFrom(dptest.ServiceIP(dataplane.IPv4, 41), 80)
	sinkSvc := pingService(vip.Addr(), pod)
	sinkSvc.Name = "sink"
	sinkSvc.ClusterEndpoints[0].Ports[0].Port = 9100
	client := b.Topo.Client().NS
	for round := range rounds {
		for _, on := range []bool{false, true} {
			st := dptest.State(b.Node, sinkSvc, pingService(pingVIP.Addr(), pod))
			if on {
				st.Config.FlowtableInterfaces, st.Links = []string{"*"}, links
			}
			b.apply(t, st)
			m := flowMeasure{Flowtable: on, Round: round}
			bulk, err := traffic.Bulk(b.Topo, client, vip, 5*time.Second, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			m.BulkMbps = bulk.BitsPerSecond / 1e6
			if m.Connect, err = traffic.Connect(b.Topo, client, []netip.AddrPort{vip}, 2000, time.Second); err != nil {
				t.Fatal(err)
			}
			conn := dialPing(t, b.Topo, client, pingVIP)
			if _, err := conn.roundTrips(50); err != nil { // established, and offloaded when on
				t.Fatal(err)
			}
			rtts, err := conn.roundTrips(5000)
			if err != nil {
				t.Fatal(err)
			}
			if on { // before the close: a FIN ends the offload
				if n := len(conntrackLines(t, b, "dport=80", "[OFFLOAD]")); n == 0 {
					t.Errorf("round %d: nothing offloaded with the flowtable on", round)
				}
			}
			_ = conn.c.Close()
			slices.Sort(rtts)
			m.RTTP50 = float64(rtts[len(rtts)/2].Nanoseconds()) / 1e3
			m.RTTP99 = float64(rtts[len(rtts)*99/100].Nanoseconds()) / 1e3
			line, _ := json.Marshal(m)
			fmt.Printf("flowtable-measure %s\n", line)
		}
	}
}
