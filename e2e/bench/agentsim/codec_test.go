package agentsim

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func service(name string) *switchyardv1.Resource {
	return &switchyardv1.Resource{Name: name, Version: "v1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{}}}
}

func TestCodecScans(t *testing.T) {
	tests := []struct {
		name    string
		lay     layout
		msg     proto.Message
		want    frame
		invalid bool
	}{
		{
			name: "delta",
			lay:  deltaLayout,
			msg: &switchyardv1.DeltaSnapshotsResponse{
				SystemVersion: "sv", Nonce: "7", ControlPlaneId: "cp",
				Resources: []*switchyardv1.Resource{service("ns/a"), service("ns/b")}, RemovedResources: []string{"ns/c"},
			},
			want: frame{version: "sv", nonce: "7", resources: 2, removed: 1},
		},
		{
			name: "sotw part",
			lay:  sotwLayout,
			msg:  &switchyardv1.StreamSnapshotsResponse{Nonce: "3", Resources: []*switchyardv1.Resource{service("ns/a")}},
			want: frame{nonce: "3", resources: 1},
		},
		{
			name:    "resource without a body is NACKed",
			lay:     deltaLayout,
			msg:     &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "sv", Nonce: "1", Resources: []*switchyardv1.Resource{{Name: "ns/a"}}},
			want:    frame{version: "sv", nonce: "1", resources: 1},
			invalid: true,
		},
		{
			name:    "resource without a name is NACKed",
			lay:     deltaLayout,
			msg:     &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "sv", Nonce: "1", Resources: []*switchyardv1.Resource{service("")}},
			want:    frame{version: "sv", nonce: "1", resources: 1},
			invalid: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			c := &codec{layout: tt.lay}
			var got frame
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
				t.Fatal(err)
			}
			if (got.invalid != nil) != tt.invalid {
				t.Errorf("invalid = %v, want %v", got.invalid, tt.invalid)
			}
			tt.want.size = proto.Size(tt.msg)
			got.invalid = nil
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(frame{})); diff != "" {
				t.Errorf("frame (-want +got):\n%s", diff)
			}
		})
	}
}
