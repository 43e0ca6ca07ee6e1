package nodeview

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func serviceCIDR(name string, cidrs ...string) *model.ServiceCIDR {
	return &model.ServiceCIDR{Name: name, CIDRs: prefixes(cidrs...)}
}

func TestServiceCIDRs(t *testing.T) {
	tests := []struct {
		name string
		in   []*model.ServiceCIDR
		want []string
	}{
		{name: "none"},
		{name: "an object without ranges", in: []*model.ServiceCIDR{serviceCIDR("empty")}},
		{
			name: "one dual-stack object",
			in:   []*model.ServiceCIDR{serviceCIDR("kubernetes", "fd00:10:96::/112", "10.96.0.0/16")},
			want: []string{"10.96.0.0/16", "fd00:10:96::/112"},
		},
		{
			name: "several: sorted by address, then length; one range in two objects once",
			in: []*model.ServiceCIDR{
				serviceCIDR("b", "10.96.0.0/12", "10.100.0.0/16"),
				serviceCIDR("a", "10.96.0.0/16", "10.100.0.0/16"),
			},
			want: []string{"10.96.0.0/12", "10.96.0.0/16", "10.100.0.0/16"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := model.NewState()
			for _, sc := range tc.in {
				st.ServiceCIDRs[sc.Name] = sc
			}
			if diff := cmp.Diff(tc.want, serviceCIDRs(st)); diff != "" {
				t.Errorf("serviceCIDRs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeConfigCarriesRangesAndNodePorts: every node's NodeConfig, a
// node the state does not know included, has the service ranges and the
// node port addresses the control plane was given.
func TestNodeConfigCarriesRangesAndNodePorts(t *testing.T) {
	st := smallState()
	st.ServiceCIDRs["kubernetes"] = serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112")
	opts := Options{Defaults: Defaults{NodePortAddresses: []string{"primary", "192.168.0.0/16"}}}
	ix := NewIndex(st, opts)
	for _, node := range []string{"n1", "n2", "unknown"} {
		nc := configOf(t, ix.Node(node).Config())
		if diff := cmp.Diff([]string{"10.96.0.0/16", "fd00:10:96::/112"}, nc.GetServiceCidrs()); diff != "" {
			t.Errorf("%s: service_cidrs (-want +got):\n%s", node, diff)
		}
		if diff := cmp.Diff([]string{"primary", "192.168.0.0/16"}, nc.GetNodePortAddresses()); diff != "" {
			t.Errorf("%s: node_port_addresses (-want +got):\n%s", node, diff)
		}
	}
	if got := configOf(t, NewIndex(smallState(), Options{}).Node("n1").Config()); len(got.GetServiceCidrs())+len(got.GetNodePortAddresses()) != 0 {
		t.Errorf("without ServiceCIDRs or node port addresses: %v %v", got.GetServiceCidrs(), got.GetNodePortAddresses())
	}
}

func TestUpdateServiceCIDRs(t *testing.T) {
	state := func() *model.State {
		st := smallState()
		st.ServiceCIDRs["kubernetes"] = serviceCIDR("kubernetes", "10.96.0.0/16")
		return st
	}
	runConfigCases(t, state, Options{}, []configCase{
		{
			name: "a ServiceCIDR added: every node's config, nothing listed",
			edit: func(st *model.State) { st.ServiceCIDRs["extra"] = serviceCIDR("extra", "10.100.0.0/16") },
			want: Changes{AllConfigs: true},
		},
		{
			name: "the ServiceCIDR deleted: an empty list",
			edit: func(st *model.State) { delete(st.ServiceCIDRs, "kubernetes") },
			want: Changes{AllConfigs: true},
		},
		{
			name: "a second object with the same range: the same list, nothing changes",
			edit: func(st *model.State) { st.ServiceCIDRs["copy"] = serviceCIDR("copy", "10.96.0.0/16") },
		},
		{
			name: "a ServiceCIDR change and a service change in one batch",
			edit: func(st *model.State) {
				st.ServiceCIDRs["kubernetes"] = serviceCIDR("kubernetes", "10.96.0.0/16", "fd00:10:96::/112")
				replaceEP(st, "plain", 0, notReady)
			},
			services: []string{"plain"},
			want:     Changes{Names: []string{"ns/plain"}, AllConfigs: true},
		},
		{
			name:     "a service change alone: configs kept",
			edit:     func(st *model.State) { replaceEP(st, "plain", 0, notReady) },
			services: []string{"plain"},
			want:     Changes{Names: []string{"ns/plain"}},
		},
	}, func(t *testing.T, st *model.State, next *Index, _ Changes) {
		for _, n := range configNodes {
			now := next.Node(n).Config()
			if diff := cmp.Diff(serviceCIDRs(st), configOf(t, now).GetServiceCidrs()); diff != "" {
				t.Errorf("%s: service_cidrs (-want +got):\n%s", n, diff)
			}
		}
	})
}
