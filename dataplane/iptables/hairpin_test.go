package iptables_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
)

const (
	setV4 = "KUBE-SWYD-HAIRPIN"
	setV6 = "KUBE-SWYD-HAIRPIN6"
)

// ipsetCalls returns the ipset commands run, as "argv | stdin".
func ipsetCalls(f *iptablestest.Fake) []string {
	var out []string
	for _, c := range f.Calls() {
		if c.Argv[0] == "ipset" {
			out = append(out, strings.Join(c.Argv, " ")+" | "+c.Stdin)
		}
	}
	return out
}

func TestHairpinSetHoldsEveryEndpoint(t *testing.T) {
	f, _ := applied(t, state(2))
	want := []string{
		"10.244.0.1,udp:5353,10.244.0.1", "10.244.0.101,udp:5353,10.244.0.101",
		"10.244.0.102,udp:5353,10.244.0.102", "10.244.0.2,udp:5353,10.244.0.2",
	}
	if diff := cmp.Diff(want, f.SetMembers(setV4)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", setV4, diff)
	}
	want6 := []string{"fd00:244::1,udp:5353,fd00:244::1", "fd00:244::2,udp:5353,fd00:244::2"}
	if diff := cmp.Diff(want6, f.SetMembers(setV6)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", setV6, diff)
	}
	if strings.Contains(f.Dump(), "KUBE-SEP-") {
		t.Error("services without affinity still have KUBE-SEP chains")
	}
}

func TestFullSyncRepairsSetDrift(t *testing.T) {
	st := state(3)
	f, d := applied(t, st, ipv4Only)
	want := f.SetMembers(setV4)
	// An unchanged full resync reads the set back and writes nothing.
	f.ResetCalls()
	apply(t, d, st, true)
	if got := ipsetCalls(f); len(got) != 1 || !strings.HasPrefix(got[0], "ipset save "+setV4) {
		t.Errorf("full resync of an unchanged set ran %q, want only the read-back", got)
	}
	if s := d.LastSync(); s.IPSetRestores != 0 || s.Restores != 0 {
		t.Errorf("full resync of an unchanged state wrote: %+v", s)
	}
	// Someone deletes a member and adds another.
	if _, err := f.Run(t.Context(), []string{"ipset", "restore"},
		[]byte("del "+setV4+" "+want[0]+"\nadd "+setV4+" 10.9.9.9,tcp:1,10.9.9.9\n")); err != nil {
		t.Fatal(err)
	}
	apply(t, d, st, false) // partial: trusts what it applied
	if slices.Equal(f.SetMembers(setV4), want) {
		t.Fatal("drift not visible")
	}
	f.ResetCalls()
	apply(t, d, st, true)
	if diff := cmp.Diff(want, f.SetMembers(setV4)); diff != "" {
		t.Errorf("full sync did not repair the set (-want +got):\n%s", diff)
	}
	if s := d.LastSync(); s.HairpinAdded != 1 || s.HairpinRemoved != 1 || s.IPSetRestores != 2 {
		t.Errorf("repair stats %+v, want 1 added before and 1 removed after", s)
	}
}

func TestSetRecreatedWhenMissing(t *testing.T) {
	f, d := applied(t, state(2), ipv4Only)
	want := f.Dump()
	if err := d.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.SetMembers(setV4) != nil {
		t.Fatal("Cleanup left the set")
	}
	// The first sync after Cleanup creates the set before the restore
	// that matches it (the Fake refuses the restore otherwise).
	apply(t, d, state(2), false)
	if diff := cmp.Diff(want, f.Dump()); diff != "" {
		t.Errorf("resync after cleanup (-want +got):\n%s", diff)
	}
}

func TestSetOfWrongTypeIsReported(t *testing.T) {
	f := iptablestest.New()
	f.AddSet(setV4, "hash:ip", "inet")
	d := newDP(t, f, ipv4Only)
	err := d.Apply(t.Context(), state(1), dataplane.ApplyOptions{})
	if err == nil || !strings.Contains(err.Error(), "hash:ip family inet, want hash:ip,port,ip") {
		t.Fatalf("got %v, want a type mismatch error", err)
	}
}

func TestCleanupDestroysOnlyOurSets(t *testing.T) {
	f := iptablestest.New()
	f.AddSet("KUBE-LOOP-BACK", "hash:ip,port,ip", "inet", "10.0.0.1,tcp:80,10.0.0.1")
	f.AddSet("cali40all-hosts", "hash:ip", "inet")
	d := newDP(t, f)
	apply(t, d, state(4), false)
	if err := d.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, err := f.Run(t.Context(), []string{"ipset", "list", "-n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); got != "KUBE-LOOP-BACK\ncali40all-hosts\n" {
		t.Errorf("sets after Cleanup:\n%s", got)
	}
	if dump := tables(f.Dump()); strings.Contains(dump, "KUBE-") {
		t.Errorf("rules left:\n%s", dump)
	}
}
