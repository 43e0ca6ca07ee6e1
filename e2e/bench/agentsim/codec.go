package agentsim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// layout gives the field numbers of one response message.
type layout struct {
	version, resources, removed, nonce protowire.Number
}

var (
	deltaLayout = layout{version: 1, resources: 2, removed: 3, nonce: 4}
	sotwLayout  = layout{version: 1, resources: 2, removed: -1, nonce: 3}
)

// Resource fields the agent checks.
const (
	resourceName        protowire.Number = 1
	resourceService     protowire.Number = 3
	resourceNodeConfig  protowire.Number = 4
	maxScannedFieldSize                  = 64 << 20
)

// frame is what an agent needs of one response.
type frame struct {
	size      int
	version   string
	nonce     string
	resources int
	removed   int
	invalid   error // why the agent must NACK; nil when valid
	decoded   proto.Message
}

// codec marshals requests with protobuf and scans responses into frames.
// Its name is "proto", so the wire content type is unchanged.
type codec struct {
	layout  layout
	scratch []byte
	// decode, when set, also unmarshals each response into a new message
	// from it and checks the sizes agree.
	decode func() proto.Message
}

func (*codec) Name() string { return "proto" }

func (*codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("agentsim: marshal %T: not a proto message", v)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (c *codec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("agentsim: unmarshal into %T", v)
	}
	*f = frame{size: data.Len()}
	if c.decode != nil {
		m := c.decode()
		if err := proto.Unmarshal(data.Materialize(), m); err != nil {
			return err
		}
		if n := proto.Size(m); n != f.size {
			return fmt.Errorf("agentsim: proto.Size %d != wire size %d", n, f.size)
		}
		f.decoded = m
	}
	r := data.Reader()
	defer r.Close()
	return c.scan(r, f)
}

// scan reads the top-level fields of a response.
func (c *codec) scan(r *mem.Reader, f *frame) error {
	for r.Remaining() > 0 {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("agentsim: tag: %w", err)
		}
		num, typ := protowire.Number(tag>>3), protowire.Type(tag&7)
		if typ != protowire.BytesType {
			return fmt.Errorf("agentsim: field %d has wire type %d", num, typ)
		}
		n, err := binary.ReadUvarint(r)
		if err != nil || n > maxScannedFieldSize {
			return fmt.Errorf("agentsim: length of field %d: %d, %v", num, n, err)
		}
		b, err := c.read(r, int(n))
		if err != nil {
			return err
		}
		switch num {
		case c.layout.version:
			f.version = string(b)
		case c.layout.nonce:
			f.nonce = string(b)
		case c.layout.removed:
			f.removed++
		case c.layout.resources:
			if err := checkResource(b); err != nil && f.invalid == nil {
				f.invalid = fmt.Errorf("resource %d: %w", f.resources, err)
			}
			f.resources++
		}
	}
	return nil
}

// read returns the next n bytes in a buffer reused across calls.
func (c *codec) read(r io.Reader, n int) ([]byte, error) {
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	b := c.scratch[:n]
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("agentsim: short field: %w", err)
	}
	return b, nil
}

// checkResource is the real agent's validation: a name and a body.
func checkResource(b []byte) error {
	var name, body bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		switch num {
		case resourceName:
			name = m > 1
		case resourceService, resourceNodeConfig:
			body = true
		}
		b = b[m:]
	}
	switch {
	case !name:
		return errors.New("no name")
	case !body:
		return errors.New("no body")
	}
	return nil
}

var (
	_ proto.Message = (*switchyardv1.DeltaSnapshotsResponse)(nil)
	_ proto.Message = (*switchyardv1.StreamSnapshotsResponse)(nil)
)
