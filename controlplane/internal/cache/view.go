package cache

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// View is one resource of a node's view, serialized once by the compute
// side (package nodeview) and shared, read-only, by every node that has
// it and every response it goes into.
type View struct {
	// Name is the resource name.
	Name string
	// Version is the content hash of the body; the compute side defines
	// the hash, the cache and the servers only compare versions.
	Version string
	// Bytes is the deterministic wire encoding of the
	// switchyardv1.Resource {Name, Version, body}: the exact bytes sent.
	// Never modified.
	Bytes []byte

	// framed is Bytes behind the tag and length of ResourcesField, in one
	// array (Bytes is its tail), so a response can reference the whole
	// field as one buffer (package server/wire). Nil in a View not built
	// by NewView.
	framed []byte
	// raw is Bytes as a Resource for marshalling (Raw), built once and
	// shared: 10k resources in every node's first response were 10k new
	// messages per node.
	raw *switchyardv1.Resource
}

// ResourcesField is the field number both discovery responses
// (DeltaSnapshotsResponse, StreamSnapshotsResponse) carry resources in.
const ResourcesField protowire.Number = 2

// NewView returns the view of a resource whose deterministic encoding is
// encoded. It copies encoded once, behind the tag and length of
// ResourcesField, and keeps no reference to it.
func NewView(name, version string, encoded []byte) View {
	framed := make([]byte, 0, protowire.SizeTag(ResourcesField)+protowire.SizeBytes(len(encoded)))
	framed = protowire.AppendTag(framed, ResourcesField, protowire.BytesType)
	framed = protowire.AppendBytes(framed, encoded)
	b := framed[len(framed)-len(encoded):]
	raw := &switchyardv1.Resource{}
	raw.ProtoReflect().SetUnknown(b)
	return View{Name: name, Version: version, Bytes: b, framed: framed, raw: raw}
}

// Framed returns Bytes behind the tag and length of ResourcesField: the
// exact bytes of this resource inside a response. Nil when v was not built
// by NewView. Never modified.
func (v *View) Framed() []byte { return v.framed }

// Raw wraps the view's encoding into a Resource without decoding it: the
// bytes are stored as the message's unknown fields, which protobuf writes
// out verbatim. Marshalling a response full of Raw resources is therefore a
// copy, and the receiver parses them as ordinary known fields.
//
// The result is only for marshalling: its getters return zero values. A
// view built by NewView hands out one such Resource, shared by every
// response it goes into; marshalling only reads it.
func (v *View) Raw() *switchyardv1.Resource {
	if v.raw != nil {
		return v.raw
	}
	r := &switchyardv1.Resource{}
	r.ProtoReflect().SetUnknown(protoreflect.RawFields(v.Bytes))
	return r
}

// Decode parses a view's encoding into a Resource with its fields set: for
// readers that need the messages (the admin service), not for sending.
func Decode(v *View) (*switchyardv1.Resource, error) {
	r := &switchyardv1.Resource{}
	if err := proto.Unmarshal(v.Bytes, r); err != nil {
		return nil, fmt.Errorf("decode resource %q: %w", v.Name, err)
	}
	return r, nil
}

// NodeView is everything one node must program, immutable once published;
// *nodeview.NodeView implements it.
type NodeView interface {
	// Version is the system version: a content hash of the (name, version)
	// pairs, the same on every replica for the same content. The compute
	// side defines the hash; the cache only compares versions.
	Version() string
	Len() int
	// Get returns the view of that name.
	Get(name string) (*View, bool)
	// Range calls fn for each view in name order until fn returns false.
	Range(fn func(*View) bool)
}
