package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func rawResources(t *testing.T, n int) []*switchyardv1.Resource {
	t.Helper()
	out := make([]*switchyardv1.Resource, n)
	for i := range out {
		v := cachetest.MustView(t, &switchyardv1.Resource{
			Name: fmt.Sprintf("ns/svc-%03d", i),
			Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
				ClusterIps: []string{fmt.Sprintf("10.96.%d.%d", i/256, i%256)},
			}},
		})
		out[i] = v.Raw()
	}
	return out
}

// TestMarshalMatchesProtoCodec: the codec's bytes are exactly what gRPC's
// proto codec sends, for every shape a response takes.
func TestMarshalMatchesProtoCodec(t *testing.T) {
	withUnknown := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "v1", Resources: rawResources(t, 2), Nonce: "3"}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "x"))
	decoded := &switchyardv1.Resource{Name: "ns/decoded", Version: "abc",
		Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{ClusterIps: []string{"10.0.0.1"}}}}
	cases := []struct {
		name string
		msg  proto.Message
	}{
		{"delta, every field", &switchyardv1.DeltaSnapshotsResponse{
			SystemVersion: "0123456789abcdef", Resources: rawResources(t, 50),
			RemovedResources: []string{"ns/a", "ns/b"}, Nonce: "17", ControlPlaneId: "cp-0",
		}},
		{"delta, resources only", &switchyardv1.DeltaSnapshotsResponse{Resources: rawResources(t, 3)}},
		{"delta, decoded and empty resources", &switchyardv1.DeltaSnapshotsResponse{
			Resources: append(rawResources(t, 2), decoded, &switchyardv1.Resource{}), Nonce: "1",
		}},
		{"delta, no resources", &switchyardv1.DeltaSnapshotsResponse{RemovedResources: []string{"ns/a"}, Nonce: "2"}},
		{"delta, unknown fields", withUnknown},
		{"sotw", &switchyardv1.StreamSnapshotsResponse{
			VersionInfo: "v", Resources: rawResources(t, 20), Nonce: "9", ControlPlaneId: "cp-1",
		}},
		{"another message", &switchyardv1.Resource{Name: "n"}},
	}
	c := New()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			data, err := c.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got := data.Materialize()
			if !bytes.Equal(want, got) {
				t.Fatalf("bytes differ from proto.Marshal:\nwant %x\ngot  %x", want, got)
			}
			back := tc.msg.ProtoReflect().Type().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(got)}, back); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(decode(t, tc.msg), back, protocmp.Transform()); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// decode turns raw resources into decoded ones, as a receiver sees them.
func decode(t *testing.T, m proto.Message) proto.Message {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().Type().New().Interface()
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMarshalSharesViewBytes: a raw resource's bytes reach the transport
// by reference, not copied.
func TestMarshalSharesViewBytes(t *testing.T) {
	res := rawResources(t, 3)
	data, err := New().Marshal(&switchyardv1.DeltaSnapshotsResponse{Resources: res, Nonce: "1"})
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, b := range data {
		for _, r := range res {
			u := r.ProtoReflect().GetUnknown()
			if d := b.ReadOnlyData(); len(d) > 0 && &d[0] == &u[0] {
				shared++
			}
		}
	}
	if shared != len(res) {
		t.Errorf("%d of %d resources shared by reference", shared, len(res))
	}
}

func BenchmarkMarshal(b *testing.B) {
	t := &testing.T{}
	resp := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "v", Resources: rawResources(t, 10000), Nonce: "1"}
	for _, bc := range []struct {
		name string
		c    interface {
			Marshal(any) (mem.BufferSlice, error)
		}
	}{{"wire", New()}, {"proto", New().base}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := bc.c.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
	}
}

// TestIsRawKnowsEveryField: isRaw names every field of Resource; a new
// field must be added there, or a raw-looking resource that sets it would
// lose it on the wire.
func TestIsRawKnowsEveryField(t *testing.T) {
	var got []string
	fields := (&switchyardv1.Resource{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		got = append(got, string(fields.Get(i).Name()))
	}
	want := []string{"name", "version", "service", "node_config"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Resource's fields changed; update isRaw (-want +got):\n%s", diff)
	}
}

// framedViews are views built by cache.NewView, as nodeview's are: framed
// once, with one shared Raw resource.
func framedViews(t *testing.T, n int) ([]*cache.View, []*switchyardv1.Resource) {
	t.Helper()
	views := make([]*cache.View, n)
	res := make([]*switchyardv1.Resource, n)
	for i := range views {
		v := cachetest.MustView(t, &switchyardv1.Resource{
			Name: fmt.Sprintf("ns/svc-%03d", i),
			Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{ClusterIps: []string{"10.96.0.1"}}},
		})
		views[i], res[i] = v, v.Raw()
	}
	return views, res
}

// TestMessageMatchesProtoCodec: a Message with framed views encodes to the
// response's bytes, one buffer per resource; views that do not match the
// resources fall back to the per-resource encoding, with the same bytes.
func TestMessageMatchesProtoCodec(t *testing.T) {
	views, res := framedViews(t, 400)
	resp := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "v", Resources: res,
		RemovedResources: []string{"ns/gone"}, Nonce: "5", ControlPlaneId: "cp"}
	small := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "v", Resources: res[:2], Nonce: "6"}
	cases := []struct {
		name  string
		msg   *Message
		parts int
	}{
		{"framed", &Message{Message: resp, Views: views}, len(res) + 2},
		{"views missing", &Message{Message: resp}, 2*len(res) + 2},
		{"views of other resources", &Message{Message: resp, Views: append(views[1:], views[0])}, 2*len(res) + 2},
		{"sotw", &Message{Message: &switchyardv1.StreamSnapshotsResponse{Resources: res, Nonce: "1"}, Views: views}, len(res) + 1},
		{"small: copied", &Message{Message: small, Views: views[:2]}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := proto.Marshal(tc.msg.Message)
			if err != nil {
				t.Fatal(err)
			}
			data, err := New().Marshal(tc.msg)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if got := data.Materialize(); !bytes.Equal(want, got) {
				t.Fatalf("bytes differ from proto.Marshal:\nwant %x\ngot  %x", want, got)
			}
			if len(data) != tc.parts {
				t.Errorf("%d buffers, want %d", len(data), tc.parts)
			}
			// gRPC's own codec marshals a Message as the response.
			base, err := New().base.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("proto codec: %v", err)
			}
			if got := base.Materialize(); !bytes.Equal(want, got) {
				t.Errorf("proto codec bytes differ:\nwant %x\ngot  %x", want, got)
			}
		})
	}
}
