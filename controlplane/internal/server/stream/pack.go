package stream

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	// DefaultMaxMessageBytes is gRPC's default receive limit: the largest
	// response an agent accepts unless configured otherwise.
	DefaultMaxMessageBytes = 4 << 20
	// MaxNonceLen is the longest nonce a session sends (a decimal uint64).
	MaxNonceLen = 20
)

// Part is one response's share of a batch.
type Part struct {
	Resources []*cache.View
	Removed   []string
	// Triggers are the trigger times of the changes the part's resources
	// bring (the session attaches them, see TriggerSource); nil for none.
	Triggers []*switchyardv1.ChangeTriggers
}

// Batch is what brings an agent from the state it has to one view: one part
// per response. A batch with no parts sends nothing.
type Batch struct {
	Parts []Part
}

// Names returns every name the batch adds, updates or removes.
func (b Batch) Names() []string {
	var names []string
	for _, p := range b.Parts {
		for _, v := range p.Resources {
			names = append(names, v.Name)
		}
		names = append(names, p.Removed...)
	}
	return names
}

// FieldSize is the encoded size of a length-delimited field numbered below
// 16 that holds n bytes: tag, length and payload.
func FieldSize(n int) int {
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// Pack splits resources and removed names, in order, into parts whose
// encoded response stays within limit bytes, envelope being the size of the
// response's other fields. Both response types carry resources and removed
// names as fields numbered below 16. A single resource larger than the limit
// gets a part of its own, which exceeds the limit. No input, no parts.
func Pack(resources []*cache.View, removed []string, limit, envelope int) []Part {
	// Parts are sub-slices of the inputs, not copies: a first batch of 10k
	// resources is held by every session until it is acknowledged.
	var parts []Part
	res, rem := 0, 0 // where the current part starts in each input
	i, j := 0, 0     // how far the current part reaches
	size := envelope
	cut := func() {
		parts = append(parts, Part{Resources: resources[res:i:i], Removed: removed[rem:j:j]})
		res, rem, size = i, j, envelope
	}
	add := func(n int) {
		if size+n > limit && (i > res || j > rem) {
			cut()
		}
		size += n
	}
	for ; i < len(resources); i++ {
		add(FieldSize(len(resources[i].Bytes)))
	}
	for ; j < len(removed); j++ {
		add(FieldSize(len(removed[j])))
	}
	if i > res || j > rem {
		cut()
	}
	for k := range parts {
		parts[k] = normalize(parts[k])
	}
	return parts
}

// normalize makes an empty side of a part nil, as a part built by appends
// has it.
func normalize(p Part) Part {
	if len(p.Resources) == 0 {
		p.Resources = nil
	}
	if len(p.Removed) == 0 {
		p.Removed = nil
	}
	return p
}
