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

// A state file is a text header, an empty line, and a protobuf payload:
//
//	switchyard-agent-state 2
//	kind view                  (view: view.pb; pending: pending.pb)
//	node "node-0"              (the node that wrote it)
//	version "3f9c…"            (view: the applied system version; pending: the version it leads to)
//	base "a41e…"               (pending only: the version of the view file it goes on top of)
//	sha256 <64 hex digits>     (of the payload)
//	length <bytes>             (of the payload)
//
// The header is text so that `head -7 view.pb` answers "whose, which
// version, which format" on a node.
const (
	magic = "switchyard-agent-state"
	// FormatVersion is the state-file format this agent writes and reads.
	// Format 1 (agents before it) was a bare StreamSnapshotsResponse; it
	// is rejected (ReasonLegacy), never read.
	FormatVersion = 2
	// maxHeader bounds the search for the header's end.
	maxHeader = 4096
)

const (
	kindView    = "view"
	kindPending = "pending"
)

// Reasons a state file is rejected: RejectedError.Reason, and the reason
// label of switchyard_agent_state_file_rejections_total.
const (
	ReasonEmpty      = "empty"      // 0 bytes
	ReasonLegacy     = "legacy"     // format 1: a view without a header
	ReasonNoHeader   = "no_header"  // not a state file at all
	ReasonFormat     = "format"     // another format version, or a malformed header
	ReasonKind       = "kind"       // a pending file where a view belongs, or the reverse
	ReasonNode       = "node"       // written by another node's agent
	ReasonTruncated  = "truncated"  // shorter than its header says
	ReasonChecksum   = "checksum"   // the payload is not what was written
	ReasonDecode     = "decode"     // the payload does not decode
	ReasonMismatch   = "mismatch"   // a pending file that belongs to another view file
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

// header is a state file's header.
type header struct {
	kind, node, version, base string
}

// encode returns the file holding payload under h.
func encode(h header, payload []byte) []byte {
	sum := sha256.Sum256(payload)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %d\nkind %s\nnode %s\nversion %s\n", magic, FormatVersion, h.kind, strconv.Quote(h.node), strconv.Quote(h.version))
	if h.kind == kindPending {
		fmt.Fprintf(&b, "base %s\n", strconv.Quote(h.base))
	}
	fmt.Fprintf(&b, "sha256 %s\nlength %d\n\n", hex.EncodeToString(sum[:]), len(payload))
	b.Write(payload)
	return b.Bytes()
}

// decode checks data against the kind and node wanted and returns its
// header and payload; a rejection is a *RejectedError without Path.
func decode(data []byte, kind, node string) (header, []byte, error) {
	reject := func(reason, format string, args ...any) (header, []byte, error) {
		return header{}, nil, &RejectedError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
	}
	if len(data) == 0 {
		return reject(ReasonEmpty, "0 bytes")
	}
	if !bytes.HasPrefix(data, []byte(magic+" ")) {
		if isLegacy(data) {
			return reject(ReasonLegacy, "format 1 (no header, written by an agent before format %d): it cannot say whose or how recent it is", FormatVersion)
		}
		return reject(ReasonNoHeader, "no %q header", magic)
	}
	end := bytes.Index(data[:min(len(data), maxHeader)], []byte("\n\n"))
	if end < 0 {
		return reject(ReasonTruncated, "the header does not end within %d bytes", maxHeader)
	}
	lines := strings.Split(string(data[:end]), "\n")
	payload := data[end+2:]
	if v := strings.TrimPrefix(lines[0], magic+" "); v != strconv.Itoa(FormatVersion) {
		return reject(ReasonFormat, "format %s; this agent reads format %d", v, FormatVersion)
	}
	fields, err := headerFields(lines[1:])
	if err != nil {
		return reject(ReasonFormat, "%v", err)
	}
	h := header{kind: fields["kind"], node: fields["node"], version: fields["version"], base: fields["base"]}
	switch {
	case h.kind != kind:
		return reject(ReasonKind, "kind %q, want %q", h.kind, kind)
	case h.node != node:
		return reject(ReasonNode, "written by node %q, this is node %q", h.node, node)
	}
	length, err := strconv.Atoi(fields["length"])
	if err != nil || length < 0 {
		return reject(ReasonFormat, "length %q", fields["length"])
	}
	switch {
	case len(payload) < length:
		return reject(ReasonTruncated, "%d of %d payload bytes", len(payload), length)
	case len(payload) > length:
		return reject(ReasonFormat, "%d bytes after the payload", len(payload)-length)
	}
	sum := sha256.Sum256(payload)
	if got := hex.EncodeToString(sum[:]); got != fields["sha256"] {
		return reject(ReasonChecksum, "payload sha256 %s, header says %s", got, fields["sha256"])
	}
	return h, payload, nil
}

// headerFields parses "key value" lines; node, version and base are
// quoted strings. Every key but base is required.
func headerFields(lines []string) (map[string]string, error) {
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
	for _, k := range []string{"kind", "node", "version", "sha256", "length"} {
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
