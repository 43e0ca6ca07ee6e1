package iptables

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// rendered is everything a Render produces that a sync uses.
func rendered(t *testing.T, rs *Ruleset) string {
	t.Helper()
	out := rs.String()
	for _, s := range rs.Skips {
		out += fmt.Sprintf("# skip %q: %s\n", s.Service, s.Reason)
	}
	return out + fmt.Sprintf("# udp %v\n", rs.udp)
}

func memoRender(t *testing.T, st *dataplane.State, fam dataplane.Family, opts RenderOptions, m *Memo) string {
	t.Helper()
	rs, err := render(st, fam, opts, m, true)
	if err != nil {
		t.Fatalf("render with memo: %v", err)
	}
	return rendered(t, rs)
}

func freshRender(t *testing.T, st *dataplane.State, fam dataplane.Family, opts RenderOptions) string {
	t.Helper()
	rs, err := Render(st, fam, opts)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return rendered(t, rs)
}

// TestMemoMatchesFreshRender renders every golden case through one shared
// memo (each case changes node config and services) and again with every
// fragment reused: the output must be byte-identical to a fresh Render.
func TestMemoMatchesFreshRender(t *testing.T) {
	m := &Memo{}
	for _, name := range dataplanetest.Cases(t, "testdata/*/want.rules") {
		t.Run(name, func(t *testing.T) {
			st := dataplanetest.LoadState(t, name)
			opts := goldenOptions
			for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
				want := freshRender(t, st, fam, opts)
				if diff := cmp.Diff(want, memoRender(t, st, fam, opts, m)); diff != "" {
					t.Fatalf("%s first render with memo differs (-fresh +memo):\n%s", fam, diff)
				}
				if diff := cmp.Diff(want, memoRender(t, st, fam, opts, m)); diff != "" {
					t.Fatalf("%s reused render differs (-fresh +memo):\n%s", fam, diff)
				}
				if m.Rendered != 0 || m.Reused != len(st.Services) {
					t.Errorf("%s second render: rendered %d, reused %d of %d", fam, m.Rendered, m.Reused, len(st.Services))
				}
			}
		})
	}
}

// TestMemoReRendersOnlyChanges walks a sequence of states and checks both
// the output and how many services were rendered anew.
func TestMemoReRendersOnlyChanges(t *testing.T) {
	base := &dataplane.State{
		Config:   &switchyardv1.NodeConfig{NodeName: "n", ClusterCidrs: []string{"10.244.0.0/16"}},
		Services: map[string]*switchyardv1.ServiceView{},
	}
	for i := range 200 {
		base.Services[fmt.Sprintf("ns/s%d", i)] = benchService(i, 3)
	}
	with := func(st *dataplane.State, mut func(*dataplane.State)) *dataplane.State {
		next := &dataplane.State{Config: st.Config, Services: map[string]*switchyardv1.ServiceView{}}
		for k, v := range st.Services {
			next.Services[k] = v
		}
		mut(next)
		return next
	}
	moved := with(base, func(s *dataplane.State) { s.Services["ns/s7"] = benchService(7, 2) })
	added := with(moved, func(s *dataplane.State) { s.Services["ns/s900"] = benchService(900, 1) })
	removed := with(added, func(s *dataplane.State) { delete(s.Services, "ns/s3") })
	resent := with(removed, func(s *dataplane.State) {
		for k, v := range s.Services {
			s.Services[k] = proto.Clone(v).(*switchyardv1.ServiceView)
		}
	})
	newNode := with(resent, func(s *dataplane.State) {
		s.Config = &switchyardv1.NodeConfig{NodeName: "n", ClusterCidrs: []string{"10.244.0.0/16"}, MasqueradeAll: true}
	})
	steps := []struct {
		name         string
		st           *dataplane.State
		wantRendered int
	}{
		{"first", base, 200},
		{"unchanged", base, 0},
		{"one endpoint moved", moved, 1},
		{"service added", added, 1},
		{"service removed", removed, 0},
		{"equal copies resent", resent, 0},
		{"node config changed", newNode, 200},
		{"back to an earlier state", moved, 200},
	}
	m := &Memo{}
	opts := RenderOptions{ShardBits: DefaultShardBits}
	for _, s := range steps {
		got := memoRender(t, s.st, dataplane.IPv4, opts, m)
		if diff := cmp.Diff(freshRender(t, s.st, dataplane.IPv4, opts), got); diff != "" {
			t.Fatalf("%s: memo render differs (-fresh +memo):\n%s", s.name, diff)
		}
		if m.Rendered != s.wantRendered || m.Rendered+m.Reused != len(s.st.Services) {
			t.Errorf("%s: rendered %d, reused %d; want %d rendered of %d", s.name, m.Rendered, m.Reused, s.wantRendered, len(s.st.Services))
		}
	}
}
