package nodeview

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

var grpcPorts = []model.EndpointPort{slicePort("grpc", 18000)}

// cpSlice is a slice of the control plane's Service ns/cp.
func cpSlice(name string, ports []model.EndpointPort, eps ...model.Endpoint) *model.EndpointSlice {
	return newSlice("cp", name, ports, eps...)
}

func TestControlPlaneAddresses(t *testing.T) {
	udp := model.EndpointPort{Name: "grpc", Protocol: model.ProtocolUDP, Port: 18001}
	many := make([]model.Endpoint, MaxControlPlaneAddresses+5)
	var manyWant []string
	for i := range many {
		many[i] = newEP(fmt.Sprintf("10.0.%d.%d", i/200, i%200+1), "n", "")
	}
	for i := range MaxControlPlaneAddresses {
		manyWant = append(manyWant, fmt.Sprintf("10.0.%d.%d:18000", i/200, i%200+1))
	}
	tests := []struct {
		name   string
		slices []*model.EndpointSlice
		want   []string
	}{
		{name: "no slices"},
		{
			name:   "ready endpoints only",
			slices: []*model.EndpointSlice{cpSlice("cp-a", grpcPorts, newEP("10.0.0.2", "n2", ""), newEP("10.0.0.1", "n1", "", notReady), newEP("10.0.0.3", "n3", "", servingTerminating))},
			want:   []string{"10.0.0.2:18000"},
		},
		{
			name: "port named grpc among others",
			slices: []*model.EndpointSlice{cpSlice("cp-a",
				[]model.EndpointPort{slicePort("metrics", 10263), udp, slicePort("grpc", 18000)}, newEP("10.0.0.1", "n1", ""))},
			want: []string{"10.0.0.1:18000"},
		},
		{
			name:   "the only TCP port when none is named grpc",
			slices: []*model.EndpointSlice{cpSlice("cp-a", []model.EndpointPort{slicePort("", 9000)}, newEP("10.0.0.1", "n1", ""))},
			want:   []string{"10.0.0.1:9000"},
		},
		{
			name: "several ports, none named grpc: slice skipped",
			slices: []*model.EndpointSlice{
				cpSlice("cp-a", []model.EndpointPort{slicePort("a", 1), slicePort("b", 2)}, newEP("10.0.0.1", "n1", "")),
				cpSlice("cp-b", grpcPorts, newEP("10.0.0.2", "n2", "")),
			},
			want: []string{"10.0.0.2:18000"},
		},
		{
			name:   "a UDP port is never dialled",
			slices: []*model.EndpointSlice{cpSlice("cp-a", []model.EndpointPort{udp}, newEP("10.0.0.1", "n1", ""))},
		},
		{
			name:   "no port",
			slices: []*model.EndpointSlice{cpSlice("cp-a", nil, newEP("10.0.0.1", "n1", ""))},
		},
		{
			name: "both families, sorted by address (IPv4 first), IPv6 bracketed",
			slices: []*model.EndpointSlice{
				cpSlice("cp-v6", grpcPorts, newEP("fd00::10", "n2", ""), newEP("fd00::9", "n1", "")),
				cpSlice("cp-v4", grpcPorts, newEP("10.0.0.10", "n2", ""), newEP("10.0.0.9", "n1", "")),
			},
			want: []string{"10.0.0.9:18000", "10.0.0.10:18000", "[fd00::9]:18000", "[fd00::10]:18000"},
		},
		{
			name: "an address in two slices once; same address on two ports twice",
			slices: []*model.EndpointSlice{
				cpSlice("cp-a", grpcPorts, newEP("10.0.0.1", "n1", "")),
				cpSlice("cp-b", grpcPorts, newEP("10.0.0.1", "n1", "")),
				cpSlice("cp-c", []model.EndpointPort{slicePort("grpc", 18001)}, newEP("10.0.0.1", "n1", "")),
			},
			want: []string{"10.0.0.1:18000", "10.0.0.1:18001"},
		},
		{
			name:   "capped at MaxControlPlaneAddresses, lowest first",
			slices: []*model.EndpointSlice{cpSlice("cp-a", grpcPorts, many...)},
			want:   manyWant,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := controlPlaneAddresses(slicesOf(tc.slices...))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("controlPlaneAddresses (-want +got):\n%s", diff)
			}
		})
	}
}

// cpState is smallState plus the control plane's Service ns/cp with one
// ready replica on n1 and one not yet ready on n2.
func cpState() *model.State {
	st := smallState()
	st.Services[key("cp")] = newSvc("cp", withPorts(tcp("grpc", 18000)))
	st.Slices[key("cp")] = slicesOf(cpSlice("cp-a", grpcPorts,
		newEP("192.168.0.1", "n1", "a"), newEP("192.168.0.2", "n2", "b", notReady)))
	return st
}

var cpOptions = Options{AdvertiseService: key("cp")}

func TestNodeConfigAdvertisesControlPlanes(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{name: "advertised", opts: cpOptions, want: []string{"192.168.0.1:18000"}},
		{name: "feature off"},
		{name: "service without slices", opts: Options{AdvertiseService: key("plain-missing")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix := NewIndex(cpState(), tc.opts)
			for _, node := range []string{"n1", "n2", "unknown"} {
				got := configOf(t, ix.Node(node).Config()).GetControlPlaneAddresses()
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s: control_plane_addresses (-want +got):\n%s", node, diff)
				}
			}
		})
	}
}

func TestUpdateControlPlanes(t *testing.T) {
	runConfigCases(t, cpState, cpOptions, []configCase{
		{
			name: "second replica becomes ready: every node's config",
			edit: func(st *model.State) {
				replaceEP(st, "cp", 1, func(e *model.Endpoint) { e.Ready, e.Serving = true, true })
			},
			services: []string{"cp"},
			want:     Changes{Names: []string{"ns/cp"}, AllConfigs: true},
		},
		{
			name: "the ready replica's zone changes: its service view, same list",
			edit: func(st *model.State) {
				replaceEP(st, "cp", 0, func(e *model.Endpoint) { e.Zone = "b" })
			},
			services: []string{"cp"},
			want:     Changes{Names: []string{"ns/cp"}},
		},
		{
			name: "slices gone: an empty list",
			edit: func(st *model.State) {
				delete(st.Slices, key("cp"))
			},
			services: []string{"cp"},
			want:     Changes{Names: []string{"ns/cp"}, AllConfigs: true},
		},
		{
			name: "list and a node change in one batch",
			edit: func(st *model.State) {
				replaceEP(st, "cp", 0, notReady)
				replaceEP(st, "cp", 1, func(e *model.Endpoint) { e.Ready, e.Serving = true, true })
				st.Nodes["n3"] = &model.Node{Name: "n3", Zone: "a", Addresses: addrs("192.168.0.3")}
			},
			services: []string{"cp"},
			nodes:    []string{"n3"},
			want:     Changes{Names: []string{"ns/cp"}, ConfigNodes: []string{"n3"}, AllConfigs: true},
		},
		{
			name:     "another service: not read",
			edit:     func(st *model.State) { replaceEP(st, "plain", 0, notReady) },
			services: []string{"plain"},
			want:     Changes{Names: []string{"ns/plain"}},
		},
	}, func(t *testing.T, _ *model.State, _ *Index, got Changes) {
		if got.Empty() {
			t.Errorf("Empty() = true for %+v", got)
		}
	})
}

// TestControlPlanesReplicasAgree: two replicas, one that saw every event
// as it came and one that started after them, send every node the same
// NodeConfig and the same system version.
func TestControlPlanesReplicasAgree(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "ghost"}
	st := cpState()
	early := NewIndex(st, cpOptions)
	// Events in the early replica's order: a second slice (IPv6) appears,
	// then the not-ready replica becomes ready.
	v6 := cpSlice("cp-v6", grpcPorts, newEP("fd00::2", "n2", "b"), newEP("fd00::1", "n1", "a"))
	st.Slices[key("cp")][v6.Key] = v6
	early, _ = early.Update(st, []model.ServiceKey{key("cp")}, nil)
	replaceEP(st, "cp", 1, func(e *model.Endpoint) { e.Ready, e.Serving = true, true })
	early, _ = early.Update(st, []model.ServiceKey{key("cp")}, nil)

	late := NewIndex(st, cpOptions)
	want := []string{"192.168.0.1:18000", "192.168.0.2:18000", "[fd00::1]:18000", "[fd00::2]:18000"}
	for _, n := range nodes {
		a, b := early.Node(n), late.Node(n)
		if diff := cmp.Diff(want, configOf(t, b.Config()).GetControlPlaneAddresses()); diff != "" {
			t.Errorf("%s: control_plane_addresses (-want +got):\n%s", n, diff)
		}
		if a.Config().Version != b.Config().Version || a.Version() != b.Version() {
			t.Errorf("%s: replicas disagree: config %s vs %s, system %s vs %s",
				n, a.Config().Version, b.Config().Version, a.Version(), b.Version())
		}
	}
}
