package nodeview

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"iter"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// versionBytes is how many leading bytes of a SHA-256 a version keeps:
// 8 bytes, 16 hex digits.
const versionBytes = 8

// Field numbers of switchyard.v1.Resource, used to frame a body that is
// already marshalled without marshalling it a second time.
const (
	resourceFieldName       protowire.Number = 1
	resourceFieldVersion    protowire.Number = 2
	resourceFieldService    protowire.Number = 3
	resourceFieldNodeConfig protowire.Number = 4
)

// View is one resource of a node's view, built, hashed and serialized once
// and then shared, read-only, by every node that receives it: the
// cache.View the servers send (Name, Version, Bytes, framed once by
// cache.NewView) and its share of a system version. It keeps no message:
// Bytes is its one representation, and readers that need the body decode
// it (cache.Decode). Callers must not modify a View.
type View struct {
	// View's Name is the resource name: "namespace/name" for a service
	// view, the node name for a NodeConfig. Its Version is the content
	// hash of the body: the first 8 bytes, in hex, of the SHA-256 of its
	// deterministic protobuf encoding, the same in every process for the
	// same content. Its Bytes are the deterministic encoding of the
	// switchyardv1.Resource {Name, Version, body}: the exact bytes to put
	// on the wire.
	cache.View

	// pair is this (Name, Version)'s contribution to a system version.
	pair setDigest
}

// marshal is the one encoding used for hashing: deterministic, so equal
// messages give equal bytes. Sizes are computed just before marshalling,
// so the cached size is safe to use.
var marshal = proto.MarshalOptions{Deterministic: true, UseCachedSize: true}

// newServiceResource hashes and encodes a service view.
func newServiceResource(name string, sv *switchyardv1.ServiceView) *View {
	return newView(name, sv, resourceFieldService)
}

// newConfigResource hashes and encodes a node config.
func newConfigResource(name string, nc *switchyardv1.NodeConfig) *View {
	return newView(name, nc, resourceFieldNodeConfig)
}

// newView encodes body once, straight into the Resource framing that goes
// on the wire: name, a version placeholder, the body; then hashes the body
// and writes the version in place. The result is exactly what a
// deterministic marshal of the Resource gives, since that marshals fields
// in number order. This is the one place a resource becomes bytes; body
// is not kept.
func newView(name string, body proto.Message, field protowire.Number) *View {
	const versionLen = 2 * versionBytes
	size := marshal.Size(body)
	capacity := protowire.SizeTag(resourceFieldName) + protowire.SizeBytes(len(name)) +
		protowire.SizeTag(resourceFieldVersion) + protowire.SizeBytes(versionLen) +
		protowire.SizeTag(field) + protowire.SizeBytes(size)
	b := make([]byte, 0, capacity)
	if name != "" {
		b = protowire.AppendTag(b, resourceFieldName, protowire.BytesType)
		b = protowire.AppendString(b, name)
	}
	b = protowire.AppendTag(b, resourceFieldVersion, protowire.BytesType)
	b = protowire.AppendVarint(b, versionLen)
	versionAt := len(b)
	b = append(b, make([]byte, versionLen)...)
	b = protowire.AppendTag(b, field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	bodyAt := len(b)
	out, err := marshal.MarshalAppend(b, body)
	if err != nil || len(out)-bodyAt != size {
		// Unreachable: every string is made valid UTF-8 on the way in, the
		// messages have no required fields and nothing changes them
		// concurrently. Should it ever happen, the body is sent empty (for
		// a service: no endpoints, so the dataplane rejects) rather than
		// failing the whole computation.
		out = append(b[:bodyAt-protowire.SizeVarint(uint64(size))], 0)
		bodyAt = len(out)
	}
	sum := sha256.Sum256(out[bodyAt:])
	hex.Encode(out[versionAt:versionAt+versionLen], sum[:versionBytes])
	version := string(out[versionAt : versionAt+versionLen])
	return &View{View: cache.NewView(name, version, out), pair: pairDigest(name, version)}
}

// setDigest is an order-independent digest of a set of (name, version)
// pairs: the lane-wise sum, modulo 2^64, of a SHA-256 of each pair. Adding
// and removing a pair are O(1), so a node's digest is the shared set's
// digest adjusted by the node's few overrides.
type setDigest [4]uint64

// pairDigest hashes one (name, version) pair, length-prefixed so that no
// two different pairs share an encoding.
func pairDigest(name, version string) setDigest {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(name)))])
	h.Write([]byte(name))
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(version)))])
	h.Write([]byte(version))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	var d setDigest
	for i := range d {
		d[i] = binary.LittleEndian.Uint64(sum[8*i:])
	}
	return d
}

func (d *setDigest) add(o setDigest) {
	for i := range d {
		d[i] += o[i]
	}
}

func (d *setDigest) sub(o setDigest) {
	for i := range d {
		d[i] -= o[i]
	}
}

// systemVersionTag separates system versions from resource versions.
const systemVersionTag = "switchyard.v1/system-version\x00"

// version returns the system version of a set of size n with this digest:
// the first 8 bytes, in hex, of SHA-256(tag, n, digest).
func (d setDigest) version(n int) string {
	var b [len(systemVersionTag) + 8 + 32]byte
	copy(b[:], systemVersionTag)
	off := len(systemVersionTag)
	binary.LittleEndian.PutUint64(b[off:], uint64(n))
	off += 8
	for i := range d {
		binary.LittleEndian.PutUint64(b[off+8*i:], d[i])
	}
	sum := sha256.Sum256(b[:])
	return hex.EncodeToString(sum[:versionBytes])
}

// SystemVersion computes, from scratch, the system version of a set of
// resources given as (name, version) pairs in any order. NodeView.Version
// returns the same value for the same set without rehashing the shared
// part; this function is the reference for tests and for anyone who must
// recompute a version from the resources alone.
func SystemVersion(pairs iter.Seq2[string, string]) string {
	var d setDigest
	n := 0
	for name, version := range pairs {
		d.add(pairDigest(name, version))
		n++
	}
	return d.version(n)
}
