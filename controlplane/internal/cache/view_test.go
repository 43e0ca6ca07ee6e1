package cache_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestRawRoundTrip checks the pre-serialized trick: a response built from
// Raw resources marshals to bytes that parse back to the original resources
// as known fields.
func TestRawRoundTrip(t *testing.T) {
	svc := cachetest.Service("default", "web", "10.96.0.10", 80)
	svc.GetService().ClusterEndpoints = []*switchyardv1.Endpoint{{
		Address: "10.0.0.1",
		Ports:   []*switchyardv1.EndpointPort{{Port: 8080}},
		Ready:   true,
	}}
	tests := []struct {
		name string
		res  *switchyardv1.Resource
	}{
		{name: "service", res: svc},
		{name: "node config", res: cachetest.NodeConfig("node-a", "zone-1")},
		{name: "empty body", res: &switchyardv1.Resource{Name: "x/y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := cachetest.MustView(t, tt.res)
			want := proto.Clone(tt.res).(*switchyardv1.Resource)
			want.Version = v.Version

			resp := &switchyardv1.DeltaSnapshotsResponse{
				SystemVersion: "s1",
				Resources:     []*switchyardv1.Resource{v.Raw(), v.Raw()},
				Nonce:         "1",
			}
			b, err := proto.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			got := &switchyardv1.DeltaSnapshotsResponse{}
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			wantResp := &switchyardv1.DeltaSnapshotsResponse{
				SystemVersion: "s1",
				Resources:     []*switchyardv1.Resource{want, want},
				Nonce:         "1",
			}
			if diff := cmp.Diff(wantResp, got, protocmp.Transform()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
			if n := len(got.GetResources()[0].ProtoReflect().GetUnknown()); n != 0 {
				t.Errorf("parsed resource has %d unknown bytes, want 0", n)
			}
			if got, want := proto.Size(v.Raw()), len(v.Bytes); got != want {
				t.Errorf("proto.Size(Raw) = %d, want %d", got, want)
			}
		})
	}
}

func TestChangesMerge(t *testing.T) {
	tests := []struct {
		name  string
		a, b  cache.Changes
		limit int
		want  cache.Changes
	}{
		{name: "all wins", a: cache.Changes{All: true}, b: cache.Changes{Names: []string{"a"}}, limit: 5, want: cache.Changes{All: true}},
		{name: "union sorted", a: cache.Changes{Names: []string{"c", "a"}}, b: cache.Changes{Names: []string{"b", "a"}}, limit: 5, want: cache.Changes{Names: []string{"a", "b", "c"}}},
		{name: "over limit", a: cache.Changes{Names: []string{"a", "b"}}, b: cache.Changes{Names: []string{"c"}}, limit: 2, want: cache.Changes{All: true}},
		{name: "empty", limit: 1, want: cache.Changes{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.a.Merge(tt.b, tt.limit)); diff != "" {
				t.Errorf("Merge (-want +got):\n%s", diff)
			}
		})
	}
}
