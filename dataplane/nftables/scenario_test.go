package nftables

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	"github.com/switchyard-proxy/switchyard/dataplane/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/scenario"
)

// TestScenarios runs the shared scenarios over this mode's rules, on
// IPv4 and moved to IPv6 (each step applied to knftables Fakes, each
// expected packet traced through what they hold), then probes every
// golden input more widely than Probes does (unserved ports, the service
// ranges, loopback): this mode guards the service ranges, and those
// probes check that. One Dataplane walks the inputs in order and back,
// so every input but the first is a partial sync from another one
// (checked against a fresh load after each).
func TestScenarios(t *testing.T) {
	scenario.RunAll(t, newScenarioTracer, scenario.AgreeOptions{Probes: scenario.WideProbes, Walk: true})
}

// newScenarioTracer is a Dataplane over Fakes of both families, synced
// as an agent syncs it, and the Fakes' packet tracer. After each sync
// it checks what only this mode can be checked for: the partial sync
// landed as a fresh load of the same state would.
func newScenarioTracer(t *testing.T) scenario.Tracer {
	bed := newFakeBed(t, dataplane.IPv4, dataplane.IPv6)
	tr := scenario.NewTracer(bed.dp, fakeTrace(t, bed))
	tr.Check = func(t testing.TB, st *dataplane.State, opts dataplane.ApplyOptions) {
		t.Helper()
		if stats := bed.dp.LastSync(); !opts.Full && stats.Full {
			t.Errorf("a later step ran a full sync, want a partial one: %+v", stats)
		}
		// The agent sends partial syncs over netlink (Config.PartialNetlink);
		// this bed has no dialer, so the same planned transaction runs in
		// the Fakes. Check it landed: each table is what a fresh load of st
		// makes.
		for fam, fake := range bed.fakes {
			if got, want := sortedDump(fake), freshDump(t, st, fam, bed.dp); got != want {
				t.Errorf("%s table after the sync differs from a fresh load of the same state:\n%s", fam, lineDiff(got, want))
			}
		}
	}
	return tr
}

// fakeTrace traces packets through the bed's Fakes, the family's own.
func fakeTrace(t *testing.T, bed *fakeBed) scenario.TraceFunc {
	mark, err := strconv.ParseUint(masqMark, 0, 32)
	if err != nil {
		t.Fatalf("masqMark %q: %v", masqMark, err)
	}
	return func(pkt explain.Packet, nodeIPs []netip.Addr) (explain.Verdict, error) {
		fam := dataplane.IPv4
		if pkt.IPv6() {
			fam = dataplane.IPv6
		}
		return nftablestest.Tracer{Fake: bed.fakes[fam], Local: nodeIPs, HairpinSet: setHairpin, MasqMark: uint32(mark)}.Trace(pkt)
	}
}

// lineDiff lists the lines only one of two sorted dumps holds.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}
