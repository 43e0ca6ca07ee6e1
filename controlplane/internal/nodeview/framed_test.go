package nodeview

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestFramedIsBytesAsAResponseField: Framed is Bytes behind field 2's tag
// and length, in the same array, and Raw marshals to Bytes.
func TestFramedIsBytesAsAResponseField(t *testing.T) {
	v := newServiceResource("ns/web", &switchyardv1.ServiceView{ClusterIps: []string{"10.96.0.10"}})
	num, typ, n := protowire.ConsumeTag(v.Framed())
	if num != cache.ResourcesField || typ != protowire.BytesType {
		t.Fatalf("framed tag = %d/%d, want %d/bytes", num, typ, cache.ResourcesField)
	}
	body, m := protowire.ConsumeBytes(v.Framed()[n:])
	if m < 0 || n+m != len(v.Framed()) || !bytes.Equal(body, v.Bytes) {
		t.Fatalf("framed body is not Bytes")
	}
	if &v.Framed()[n+m-len(v.Bytes)] != &v.Bytes[0] {
		t.Error("Bytes is not the tail of Framed's array")
	}
	raw, err := proto.Marshal(v.Raw())
	if err != nil || !bytes.Equal(raw, v.Bytes) {
		t.Errorf("Raw marshals to %x (%v), want Bytes %x", raw, err, v.Bytes)
	}
}
