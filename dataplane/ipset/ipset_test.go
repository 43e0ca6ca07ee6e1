package ipset_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset/ipsettest"
)

func TestCreateLine(t *testing.T) {
	tests := []struct {
		spec ipset.Spec
		want string
	}{
		{ipset.Spec{Name: "H", Type: "hash:ip,port,ip", Family: "inet6", MaxElem: 1 << 20},
			"create H hash:ip,port,ip family inet6 hashsize 1024 maxelem 1048576"},
		{ipset.Spec{Name: "H", Type: "hash:ip", Family: "inet"},
			"create H hash:ip family inet hashsize 1024 maxelem 65536"},
		{ipset.Spec{Name: "P", Type: "bitmap:port"}, "create P bitmap:port range 0-65535"},
	}
	for _, tc := range tests {
		if got := tc.spec.CreateLine(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.spec, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	want := ipset.Spec{Name: "S", Type: "hash:ip,port,ip", Family: "inet", MaxElem: 10}
	if err := want.Check(ipset.Spec{Name: "S", Type: "hash:ip,port,ip", Family: "inet"}); err != nil {
		t.Errorf("same type and family: %v", err)
	}
	err := want.Check(ipset.Spec{Name: "S", Type: "hash:ip", Family: "inet"})
	if err == nil || !strings.Contains(err.Error(), "ipset S is hash:ip family inet, want hash:ip,port,ip family inet: run the mode's cleanup") {
		t.Errorf("other type: %v", err)
	}
	if err := (ipset.Spec{Name: "P", Type: "bitmap:port"}).Check(ipset.Spec{Type: "hash:ip", Family: "inet6"}); err == nil ||
		!strings.Contains(err.Error(), "is hash:ip family inet6, want bitmap:port:") {
		t.Errorf("bitmap: %v", err)
	}
}

func TestDiff(t *testing.T) {
	s := ipset.Spec{Name: "S", Type: "hash:ip", Family: "inet"}
	have := map[string]struct{}{"10.0.0.1": {}, "10.0.0.3": {}, "10.0.0.2": {}}
	want := map[string]struct{}{"10.0.0.2": {}, "10.0.0.5": {}, "10.0.0.4": {}}
	got := ipset.Diff(s, have, want, false)
	wantC := ipset.Changes{
		Pre:   "add S 10.0.0.4\nadd S 10.0.0.5\n",
		Post:  "del S 10.0.0.1\ndel S 10.0.0.3\n",
		Added: 2, Removed: 2,
	}
	if diff := cmp.Diff(wantC, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got = ipset.Diff(s, nil, map[string]bool{"10.0.0.1": true}, true)
	if got.Pre != s.CreateLine()+"\nadd S 10.0.0.1\n" || got.Post != "" {
		t.Errorf("create: %+v", got)
	}
	if got := ipset.Diff(s, want, want, false); got != (ipset.Changes{}) {
		t.Errorf("equal sets: %+v", got)
	}
}

func TestParseKeeps(t *testing.T) {
	out := `create SWYD-IPVS-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x1
add SWYD-IPVS-CLUSTER-IP 10.96.0.1,tcp:80
create SWYD-IPVS-NODE-PORT-TCP bitmap:port range 0-65535
add SWYD-IPVS-NODE-PORT-TCP 30080
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.2,tcp:80
add SWYD-IPVS-NO-CREATE 1
`
	got := ipset.Parse([]byte(out), func(n string) bool { return strings.HasPrefix(n, "SWYD-IPVS-") })
	want := map[string]*ipset.Set{
		"SWYD-IPVS-CLUSTER-IP": {Spec: ipset.Spec{Name: "SWYD-IPVS-CLUSTER-IP", Type: "hash:ip,port", Family: "inet"},
			Members: map[string]bool{"10.96.0.1,tcp:80": true}},
		"SWYD-IPVS-NODE-PORT-TCP": {Spec: ipset.Spec{Name: "SWYD-IPVS-NODE-PORT-TCP", Type: "bitmap:port"},
			Members: map[string]bool{"30080": true}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	c := got["SWYD-IPVS-NODE-PORT-TCP"].Clone()
	c.Members["1"] = true
	if got["SWYD-IPVS-NODE-PORT-TCP"].Members["1"] {
		t.Error("Clone shares members")
	}
}

// TestAgainstFake drives the fake as the modes drive the binary: a
// restore creates and fills a set, reads see it, a missing set reads as
// nil, and a failed restore is neither counted nor silent.
func TestAgainstFake(t *testing.T) {
	ctx := t.Context()
	f := ipsettest.New()
	f.AddSet("OTHER", "hash:ip", "inet", "10.0.0.9")
	spec := ipset.Spec{Name: "S", Type: "hash:ip,port,ip", Family: "inet"}
	if s, err := ipset.SaveSet(ctx, f, "S"); s != nil || err != nil {
		t.Fatalf("missing set: %+v, %v", s, err)
	}
	var n int
	ch := ipset.Diff(spec, nil, map[string]bool{"10.0.0.1,tcp:80,10.0.0.1": true}, true)
	if err := ipset.Restore(ctx, f, ch.Pre, &n); err != nil || n != 1 {
		t.Fatalf("restore: %v, count %d", err, n)
	}
	if err := ipset.Restore(ctx, f, "", &n); err != nil || n != 1 {
		t.Errorf("empty restore ran: %v, count %d", err, n)
	}
	// -exist: the same input again converges instead of failing.
	if err := ipset.Restore(ctx, f, ch.Pre, nil); err != nil {
		t.Errorf("repeated restore: %v", err)
	}
	s, err := ipset.SaveSet(ctx, f, "S")
	want := &ipset.Set{Spec: ipset.Spec{Name: "S", Type: "hash:ip,port,ip", Family: "inet"},
		Members: map[string]bool{"10.0.0.1,tcp:80,10.0.0.1": true}}
	if err != nil || !cmp.Equal(s, want) {
		t.Errorf("SaveSet: %v\n%s", err, cmp.Diff(want, s))
	}
	all, err := ipset.Save(ctx, f, func(n string) bool { return n == "S" })
	if err != nil || len(all) != 1 || !cmp.Equal(all["S"], want) {
		t.Errorf("Save: %v %+v", err, all)
	}
	err = ipset.Restore(ctx, f, "add S 10.0.0.1,tcp:80\n", &n)
	if err == nil || !strings.HasPrefix(err.Error(), "ipset restore: ") || n != 1 {
		t.Errorf("bad restore: %v, count %d", err, n)
	}
	if _, err := ipset.Save(ctx, failing{}, func(string) bool { return true }); err == nil || !strings.HasPrefix(err.Error(), "ipset save: ") {
		t.Errorf("failing save: %v", err)
	}
	if _, err := ipset.SaveSet(ctx, failing{}, "S"); err == nil || !strings.Contains(err.Error(), "read back ipset S") {
		t.Errorf("failing save S: %v", err)
	}
}

// failing is a Runner whose every command fails as a missing binary would.
type failing struct{}

func (failing) Run(context.Context, []string, []byte) ([]byte, error) {
	return nil, errors.New("exec: \"ipset\": executable file not found in $PATH")
}
