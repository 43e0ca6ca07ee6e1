package healthcheck

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func hcResource(name string, port uint32, ready int) *switchyardv1.Resource {
	sv := &switchyardv1.ServiceView{Namespace: "ns", Name: name, HealthCheckNodePort: port}
	for range ready {
		sv.LocalEndpoints = append(sv.LocalEndpoints, &switchyardv1.Endpoint{Ready: true})
	}
	return &switchyardv1.Resource{Name: "ns/" + name, Body: &switchyardv1.Resource_Service{Service: sv}}
}

// TestIndexFollowsServices walks updates that add, change, drop and
// remove health-check services and checks Index against Services.
func TestIndexFollowsServices(t *testing.T) {
	v := &view.View{Resources: map[string]*switchyardv1.Resource{}}
	for i := range 5 {
		r := hcResource(fmt.Sprint("s", i), uint32(30000+i), 1)
		v.Resources[r.Name] = r
	}
	updates := []struct {
		u         *view.Update
		wantMoved bool
	}{
		{&view.Update{Resources: map[string]*switchyardv1.Resource{"ns/s1": hcResource("s1", 30001, 2)}}, true},
		{&view.Update{Resources: map[string]*switchyardv1.Resource{"ns/s2": hcResource("s2", 0, 0)}}, true},
		{&view.Update{Removed: []string{"ns/s3"}}, true},
		{&view.Update{Resources: map[string]*switchyardv1.Resource{"ns/plain": hcResource("plain", 0, 3)}}, false},
		{&view.Update{Resources: map[string]*switchyardv1.Resource{"ns/s9": hcResource("s9", 30009, 0)}}, true},
	}
	var x Index
	if got, moved := x.Update(v, map[string]struct{}{}); !moved || !cmp.Equal(Services(v), got) {
		t.Fatalf("first Update = %v, %v; want every service, moved", got, moved)
	}
	for i, step := range updates {
		v = v.With(step.u)
		got, moved := x.Update(v, view.Changed(step.u))
		if diff := cmp.Diff(Services(v), got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("update %d: (-Services +Index):\n%s", i, diff)
		}
		if moved != step.wantMoved {
			t.Errorf("update %d: moved = %v, want %v", i, moved, step.wantMoved)
		}
	}
}
