package persist

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// The records of changes.log, after its header:
//
//	kind    1 byte: 'I' (intent: an update the next commit may put in the
//	        kernel) or 'A' (applied: the view after a commit, as the
//	        resources of the names that changed since the view before it)
//	length  4 bytes, big endian: of the payload
//	crc     4 bytes: CRC-32C of kind and length
//	payload a DeltaSnapshotsResponse: system version, resources, removed names
//	sha256  32 bytes: of everything before it in the record
//
// Every record is fsynced before the call that wrote it returns, so a
// crash can tear only the last one, and no caller was told it was
// written: a last record cut short, or failing its checksum, or zeros
// where a record would start, is dropped. Anything bad followed by
// more records was written and is damaged: the log is rejected.
const (
	recIntent  = 'I'
	recApplied = 'A'
	recHead    = 9
	recSum     = sha256.Size
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is one decoded log record.
type record struct {
	kind byte
	u    *view.Update
}

func encodeRecord(kind byte, u *view.Update) ([]byte, error) {
	payload, err := encodeUpdate(u)
	if err != nil {
		return nil, err
	}
	b := make([]byte, recHead, recHead+len(payload)+recSum)
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:5], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[5:9], crc32.Checksum(b[:5], castagnoli))
	b = append(b, payload...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...), nil
}

// scanRecords decodes the records of body. It returns the intact ones
// and the bytes they span; torn reports a last record dropped. A damaged
// record before the last is a *RejectedError without Path.
func scanRecords(body []byte) (recs []record, valid int, torn bool, err error) {
	for off := 0; off < len(body); {
		rest := body[off:]
		if len(rest) < recHead {
			return recs, off, true, nil
		}
		n := int(binary.BigEndian.Uint32(rest[1:5]))
		if crc32.Checksum(rest[:5], castagnoli) != binary.BigEndian.Uint32(rest[5:9]) || !validKind(rest[0]) {
			if allZero(rest) {
				return recs, off, true, nil // a filesystem's unwritten tail
			}
			return nil, 0, false, reject(ReasonChecksum, "log record at byte %d: its head is not what was written", off)
		}
		end := recHead + n + recSum
		if end > len(rest) {
			return recs, off, true, nil // the head holds: the rest was cut short
		}
		if sum := sha256.Sum256(rest[:recHead+n]); !bytes.Equal(sum[:], rest[recHead+n:end]) {
			if end == len(rest) {
				return recs, off, true, nil
			}
			return nil, 0, false, reject(ReasonChecksum, "log record at byte %d is not what was written, and records follow it", off)
		}
		u, err := decodeUpdate(rest[recHead : recHead+n])
		if err != nil {
			return nil, 0, false, reject(ReasonDecode, "log record at byte %d: %v", off, err)
		}
		recs = append(recs, record{kind: rest[0], u: u})
		off += end
	}
	return recs, len(body), false, nil
}

func validKind(k byte) bool { return k == recIntent || k == recApplied }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// replay is base with the records on top: every applied record's
// changes, in order, and the intents recorded since the last of them
// (what the kernel may hold beyond the view), merged.
func replay(base *view.View, recs []record) (*view.View, *view.Update) {
	var applied []*view.Update
	var pending *view.Update
	for _, r := range recs {
		switch r.kind {
		case recApplied:
			applied = append(applied, r.u)
			pending = nil
		case recIntent:
			pending = view.Merge(pending, r.u)
		}
	}
	if len(applied) == 0 {
		return base, pending
	}
	return base.With(applied...), pending
}

// delta is v as the changes of the names that may differ from the view
// before it: their resources in v, and the names v lacks as removed.
func delta(v *view.View, names map[string]struct{}) *view.Update {
	u := &view.Update{SystemVersion: v.SystemVersion, Resources: map[string]*switchyardv1.Resource{}}
	for name := range names {
		if r, ok := v.Resources[name]; ok {
			u.Resources[name] = r
		} else {
			u.Removed = append(u.Removed, name)
		}
	}
	return u
}

// encodeUpdate is u as a DeltaSnapshotsResponse, resources and removed
// names sorted (deterministic).
func encodeUpdate(u *view.Update) ([]byte, error) {
	msg := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: u.SystemVersion, RemovedResources: append([]string(nil), u.Removed...)}
	sort.Strings(msg.RemovedResources)
	names := make([]string, 0, len(u.Resources))
	for name := range u.Resources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msg.Resources = append(msg.Resources, u.Resources[name])
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encode update: %w", err)
	}
	return b, nil
}

func decodeUpdate(payload []byte) (*view.Update, error) {
	var msg switchyardv1.DeltaSnapshotsResponse
	if err := proto.Unmarshal(payload, &msg); err != nil {
		return nil, fmt.Errorf("decode update: %w", err)
	}
	u := &view.Update{SystemVersion: msg.GetSystemVersion(), Resources: make(map[string]*switchyardv1.Resource, len(msg.GetResources())),
		Removed: msg.GetRemovedResources()}
	for _, r := range msg.GetResources() {
		u.Resources[r.GetName()] = r
	}
	return u, nil
}
