package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// printProto writes m as protojson indented by two spaces, as grpcurl
// prints a response. protojson's own multiline output varies its spacing
// on purpose (so nobody compares it byte for byte); json.Indent over the
// compact form makes it stable.
func printProto(w io.Writer, m proto.Message) error {
	b, err := protojson.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	return printIndented(w, b)
}

// printJSON writes v (a CLI-side result) the same way.
func printJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	return printIndented(w, b)
}

func printIndented(w io.Writer, compact []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, compact, "", "  "); err != nil {
		return fmt.Errorf("indent json: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// newTable aligns tab-separated columns, two spaces apart, as kubectl's.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

// row writes one table row; an empty cell prints "-" so columns stay
// readable and scripts splitting on blanks keep their count. Tabs and
// newlines in a cell (a NACK's message) would break the table: spaces.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		cells[i] = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// durationText is d as Go prints durations, "" when unset.
func durationText(d *durationpb.Duration) string {
	if d == nil {
		return ""
	}
	return d.AsDuration().String()
}

// rpcError is a failed RPC as one line: the method, the gRPC code and the
// server's message, without grpc-go's "rpc error: code = … desc = …".
type rpcError struct {
	method string
	err    error
}

func (e *rpcError) Error() string {
	st, ok := status.FromError(e.err)
	if !ok {
		return e.method + ": " + e.err.Error()
	}
	return fmt.Sprintf("%s: %s: %s", e.method, st.Code(), st.Message())
}

func (e *rpcError) Unwrap() error { return e.err }

func callFailed(method string, err error) error {
	return &rpcError{method: method, err: err}
}
