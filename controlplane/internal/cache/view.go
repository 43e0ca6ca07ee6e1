package cache

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// View is one resource of a node's view, already serialized once.
type View interface {
	Name() string
	Version() string
	// Encoded is the deterministic wire encoding of a *switchyardv1.Resource
	// (name, version, body). Shared by every node that has this view; never
	// modified once returned.
	Encoded() []byte
}

// NodeView is everything one node must program, immutable once published.
type NodeView interface {
	// Version is the system version: a content hash of the (name, version)
	// pairs, the same on every replica for the same content. The compute
	// side defines the hash; the cache only compares versions.
	Version() string
	Len() int
	Get(name string) (View, bool)
	// Range calls fn for each view in name order until fn returns false.
	Range(fn func(View) bool)
}

// RawView is a View that keeps the Resource Raw would build for it.
type RawView interface {
	View
	// Raw returns a Resource whose only content is Encoded's bytes as
	// unknown fields; never modified.
	Raw() *switchyardv1.Resource
}

// FramedView is a View that keeps Encoded's bytes behind the tag and
// length of field 2, where both discovery responses carry resources, in
// one array, so a response can reference the whole field without a copy.
type FramedView interface {
	View
	// Framed returns the tag, the length, then Encoded's bytes; never
	// modified.
	Framed() []byte
}

var marshal = proto.MarshalOptions{Deterministic: true}

// Encode is the deterministic wire encoding a View's Encoded must return.
func Encode(r *switchyardv1.Resource) ([]byte, error) {
	b, err := marshal.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode resource %q: %w", r.GetName(), err)
	}
	return b, nil
}

// Raw wraps a view's encoding into a Resource without decoding it: the bytes
// are stored as the message's unknown fields, which protobuf writes out
// verbatim. Marshalling a response full of Raw resources is therefore a copy,
// and the receiver parses them as ordinary known fields.
//
// The result is only for marshalling: its getters return zero values. A
// view that keeps one such Resource (RawView) hands out that one, shared
// by every response it goes into; marshalling only reads it.
func Raw(v View) *switchyardv1.Resource {
	if rv, ok := v.(RawView); ok {
		if r := rv.Raw(); r != nil {
			return r
		}
	}
	r := &switchyardv1.Resource{}
	r.ProtoReflect().SetUnknown(protoreflect.RawFields(v.Encoded()))
	return r
}

// Decode parses a view's encoding into a Resource with its fields set.
func Decode(v View) (*switchyardv1.Resource, error) {
	r := &switchyardv1.Resource{}
	if err := proto.Unmarshal(v.Encoded(), r); err != nil {
		return nil, fmt.Errorf("decode resource %q: %w", v.Name(), err)
	}
	return r, nil
}
