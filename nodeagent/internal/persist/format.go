package persist

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// A state file is a text header, an empty line, and a body:
//
//	switchyard-agent-state 3
//	kind view                  (view: view.pb; log: changes.log)
//	node "node-0"              (the node that wrote it)
//	generation 7               (view: one more at each compaction; log: its view file's)
//	version "3f9c…"            (view only: the applied system version)
//	base "a41e…"               (log only: the version of the view file it goes on top of)
//	sha256 <64 hex digits>     (view only: of the payload)
//	length <bytes>             (view only: of the payload)
//
// A view's body is its payload; a log's is its records (log.go), which
// grow after the header. The header is text so that `head -8 view.pb`
// answers "whose, which version, which format" on a node.
const (
	magic = "switchyard-agent-state"
	// FormatVersion is the state-file format this agent writes and reads.
	// Format 1 was a bare StreamSnapshotsResponse; it is rejected
	// (ReasonLegacy), never read. Format 2 rewrote the whole view and a
	// pending.pb at every sync; it is rejected (ReasonFormat) like any
	// other format: the first start after the upgrade adopts the kernel.
	FormatVersion = 3
	// maxHeader bounds the search for the header's end.
	maxHeader = 4096
)

const (
	kindView = "view"
	kindLog  = "log"
)

// Reasons a state file is rejected: RejectedError.Reason, and the reason
// label of switchyard_agent_state_file_rejections_total.
const (
	ReasonEmpty      = "empty"      // 0 bytes
	ReasonLegacy     = "legacy"     // format 1: a view without a header
	ReasonNoHeader   = "no_header"  // not a state file at all
	ReasonFormat     = "format"     // another format version, or a malformed header
	ReasonKind       = "kind"       // a log where a view belongs, or the reverse
	ReasonNode       = "node"       // written by another node's agent
	ReasonTruncated  = "truncated"  // shorter than its header says
	ReasonChecksum   = "checksum"   // the payload, or a log record before the last, is not what was written
	ReasonDecode     = "decode"     // the payload does not decode
	ReasonMismatch   = "mismatch"   // a log that belongs to another view file
	ReasonUnreadable = "unreadable" // the file could not be read
)

// RejectedError says why a state file was not restored. Test with
// IsRejected.
type RejectedError struct {
	Path   string
	Reason string
	Detail string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("state file %s rejected (%s): %s", e.Path, e.Reason, e.Detail)
}

// IsRejected returns the reason when err is (or wraps) a *RejectedError.
func IsRejected(err error) (reason string, ok bool) {
	var r *RejectedError
	if errors.As(err, &r) {
		return r.Reason, true
	}
	return "", false
}

func reject(reason, format string, args ...any) error {
	return &RejectedError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// header is a state file's header.
type header struct {
	kind, node, version, base string
	generation                uint64
}

// encodeView returns the view file holding payload under h.
func encodeView(h header, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	writeHeader(&b, h)
	fmt.Fprintf(&b, "version %s\nsha256 %s\nlength %d\n\n", strconv.Quote(h.version), hex.EncodeToString(sum[:]), len(payload))
	b.Write(payload)
	return b.Bytes()
}

// encodeLogHeader returns the header of an empty log under h.
func encodeLogHeader(h header) []byte {
	var b bytes.Buffer
	writeHeader(&b, h)
	fmt.Fprintf(&b, "base %s\n\n", strconv.Quote(h.base))
	return b.Bytes()
}

func writeHeader(b *bytes.Buffer, h header) {
	fmt.Fprintf(b, "%s %d\nkind %s\nnode %s\ngeneration %d\n", magic, FormatVersion, h.kind, strconv.Quote(h.node), h.generation)
}

// decodeView checks a view file against the node and returns its header
// and payload; a rejection is a *RejectedError without Path.
func decodeView(data []byte, node string) (header, []byte, error) {
	h, fields, payload, err := decodeHeader(data, kindView, node, "version", "sha256", "length")
	if err != nil {
		return header{}, nil, err
	}
	length, err := strconv.Atoi(fields["length"])
	if err != nil || length < 0 {
		return header{}, nil, reject(ReasonFormat, "length %q", fields["length"])
	}
	switch {
	case len(payload) < length:
		return header{}, nil, reject(ReasonTruncated, "%d of %d payload bytes", len(payload), length)
	case len(payload) > length:
		return header{}, nil, reject(ReasonFormat, "%d bytes after the payload", len(payload)-length)
	}
	sum := sha256.Sum256(payload)
	if got := hex.EncodeToString(sum[:]); got != fields["sha256"] {
		return header{}, nil, reject(ReasonChecksum, "payload sha256 %s, header says %s", got, fields["sha256"])
	}
	return h, payload, nil
}

// decodeLog checks a log's header against the node and returns it and
// the offset of its first record.
func decodeLog(data []byte, node string) (header, int, error) {
	h, _, records, err := decodeHeader(data, kindLog, node, "base")
	if err != nil {
		return header{}, 0, err
	}
	return h, len(data) - len(records), nil
}

// decodeHeader checks the header common to every kind and the keys the
// kind requires, and returns it, its fields and the body after it.
func decodeHeader(data []byte, kind, node string, required ...string) (header, map[string]string, []byte, error) {
	if len(data) == 0 {
		return header{}, nil, nil, reject(ReasonEmpty, "0 bytes")
	}
	if !bytes.HasPrefix(data, []byte(magic+" ")) {
		if isLegacy(data) {
			return header{}, nil, nil, reject(ReasonLegacy, "format 1 (no header, written by an agent before format 2): it cannot say whose or how recent it is")
		}
		return header{}, nil, nil, reject(ReasonNoHeader, "no %q header", magic)
	}
	end := bytes.Index(data[:min(len(data), maxHeader)], []byte("\n\n"))
	if end < 0 {
		return header{}, nil, nil, reject(ReasonTruncated, "the header does not end within %d bytes", maxHeader)
	}
	lines := strings.Split(string(data[:end]), "\n")
	if v := strings.TrimPrefix(lines[0], magic+" "); v != strconv.Itoa(FormatVersion) {
		return header{}, nil, nil, reject(ReasonFormat, "format %s; this agent reads format %d", v, FormatVersion)
	}
	fields, err := headerFields(lines[1:], append([]string{"kind", "node", "generation"}, required...))
	if err != nil {
		return header{}, nil, nil, reject(ReasonFormat, "%v", err)
	}
	gen, err := strconv.ParseUint(fields["generation"], 10, 64)
	if err != nil {
		return header{}, nil, nil, reject(ReasonFormat, "generation %q", fields["generation"])
	}
	h := header{kind: fields["kind"], node: fields["node"], version: fields["version"], base: fields["base"], generation: gen}
	switch {
	case h.kind != kind:
		return header{}, nil, nil, reject(ReasonKind, "kind %q, want %q", h.kind, kind)
	case h.node != node:
		return header{}, nil, nil, reject(ReasonNode, "written by node %q, this is node %q", h.node, node)
	}
	return h, fields, data[end+2:], nil
}

// headerFields parses "key value" lines; node, version and base are
// quoted strings. Every key in required must be there.
func headerFields(lines, required []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, " ")
		if !ok {
			return nil, fmt.Errorf("header line %q", l)
		}
		if k == "node" || k == "version" || k == "base" {
			s, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("header %s %s: %w", k, v, err)
			}
			v = s
		}
		out[k] = v
	}
	for _, k := range required {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("header has no %s", k)
		}
	}
	return out, nil
}

// isLegacy reports whether data is a format-1 file: a bare
// StreamSnapshotsResponse with something in it.
func isLegacy(data []byte) bool {
	var msg switchyardv1.StreamSnapshotsResponse
	return proto.Unmarshal(data, &msg) == nil && (msg.GetVersionInfo() != "" || len(msg.GetResources()) > 0)
}
