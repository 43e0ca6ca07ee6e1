package discovery

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDialOrder(t *testing.T) {
	three := []string{"10.0.0.1:18000", "10.0.0.2:18000", "[fd00::3]:18000"}
	tests := []struct {
		name               string
		node               string
		configured, learnt []string
		want               []target
	}{
		{
			name:       "configured only",
			node:       "node-a",
			configured: []string{"cp.example:18000", "cp2.example:18000"},
			want:       []target{{addr: "cp.example:18000"}, {addr: "cp2.example:18000"}},
		},
		{
			name:       "learnt first, then configured",
			node:       "node-c", // hashes to offset 0 of 3
			configured: []string{"switchyard-controlplane.switchyard-system.svc:18000"},
			learnt:     three,
			want: []target{
				{addr: "10.0.0.1:18000", learnt: true}, {addr: "10.0.0.2:18000", learnt: true}, {addr: "[fd00::3]:18000", learnt: true},
				{addr: "switchyard-controlplane.switchyard-system.svc:18000"},
			},
		},
		{
			name:       "learnt rotated by the node's name",
			node:       "node-a", // offset 2 of 3
			configured: []string{"cp:18000"},
			learnt:     three,
			want: []target{
				{addr: "[fd00::3]:18000", learnt: true}, {addr: "10.0.0.1:18000", learnt: true}, {addr: "10.0.0.2:18000", learnt: true},
				{addr: "cp:18000"},
			},
		},
		{
			name:       "deduplicated: a configured address learnt keeps its learnt place, dialled as configured",
			node:       "node-b", // offset 0 of 2
			configured: []string{"10.0.0.2:18000", "cp:18000", "cp:18000", ""},
			learnt:     []string{"10.0.0.1:18000", "10.0.0.2:18000", "10.0.0.1:18000", ""},
			want: []target{
				{addr: "10.0.0.1:18000", learnt: true}, {addr: "10.0.0.2:18000"}, {addr: "cp:18000"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := newTargets(tc.node, tc.configured, tc.learnt)
			if diff := cmp.Diff(tc.want, got.list, cmp.AllowUnexported(target{})); diff != "" {
				t.Errorf("dial list (-want +got):\n%s", diff)
			}
			// next walks the list in order and wraps; an unknown or empty
			// previous address starts over.
			prev := ""
			for i := range 2 * len(tc.want) {
				n := got.next(prev)
				if want := tc.want[i%len(tc.want)]; n != want {
					t.Fatalf("next(%q) = %+v, want %+v", prev, n, want)
				}
				prev = n.addr
			}
			if n := got.next("gone:1"); n != tc.want[0] {
				t.Errorf("next(unlisted) = %+v, want the first", n)
			}
			// restart, after a stream that worked, starts over at the
			// top, skipping the address that ended.
			for i, prev := range tc.want {
				want := tc.want[0]
				if i == 0 {
					want = tc.want[1%len(tc.want)]
				}
				if n := got.restart(prev.addr); n != want {
					t.Errorf("restart(%q) = %+v, want %+v", prev.addr, n, want)
				}
			}
		})
	}
}

// TestDialOrderSpreads: agents do not all start at the same replica.
func TestDialOrderSpreads(t *testing.T) {
	learnt := []string{"10.0.0.1:18000", "10.0.0.2:18000"}
	first := map[string]int{}
	for _, node := range []string{"node-a", "node-b", "node-c", "node-d"} {
		first[newTargets(node, []string{"cp:1"}, learnt).next("").addr]++
	}
	if diff := cmp.Diff(map[string]int{"10.0.0.1:18000": 2, "10.0.0.2:18000": 2}, first); diff != "" {
		t.Errorf("first address per agent (-want +got):\n%s", diff)
	}
}

func TestLearn(t *testing.T) {
	tg := newTargets("node-b", []string{"cp:18000"}, []string{"10.0.0.1:18000"})
	steps := []struct {
		name    string
		learn   []string
		changed bool
		want    []string
	}{
		{name: "same list", learn: []string{"10.0.0.1:18000"}, want: []string{"10.0.0.1:18000", "cp:18000"}},
		{name: "empty keeps the learnt list", learn: nil, want: []string{"10.0.0.1:18000", "cp:18000"}},
		{name: "new list replaces it", learn: []string{"10.0.0.7:18000", "10.0.0.8:18000"}, changed: true,
			want: []string{"10.0.0.7:18000", "10.0.0.8:18000", "cp:18000"}},
		{name: "duplicates are one", learn: []string{"10.0.0.7:18000", "10.0.0.8:18000", "10.0.0.8:18000"},
			want: []string{"10.0.0.7:18000", "10.0.0.8:18000", "cp:18000"}},
	}
	for _, s := range steps {
		if got := tg.learn(s.learn); got != s.changed {
			t.Errorf("%s: learn = %v, want %v", s.name, got, s.changed)
		}
		if diff := cmp.Diff(s.want, tg.addrs()); diff != "" {
			t.Errorf("%s: dial list (-want +got):\n%s", s.name, diff)
		}
	}
}
