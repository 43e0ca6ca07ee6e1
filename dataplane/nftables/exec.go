package nftables

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
)

// IsNotFound reports whether err says a table, chain, set or element does
// not exist, from knftables (Fake) or from nft run through a Runner.
func IsNotFound(err error) bool {
	if knftables.IsNotFound(err) {
		return true
	}
	var re *command.RunError
	if errors.As(err, &re) {
		first, _, _ := strings.Cut(re.Stderr, "\n")
		return strings.Contains(first, "No such file or directory")
	}
	return false
}

// execInterface is a knftables.Interface whose nft commands go through a
// Runner. knftables.New runs nft in the calling process's namespace and
// offers no hook for another one; this adapter keeps knftables'
// transaction builder (the same text knftables would pipe to "nft -f -")
// and lets the Runner choose where nft runs.
type execInterface struct {
	run    command.Runner
	family knftables.Family
	table  string
	// newTx makes the transactions, which carry the family and table
	// their commands are written for. That context is unexported in
	// knftables (v0.0.22): only its two Interfaces set it, and
	// knftables.New runs nft in this process's namespace to probe it, so
	// an empty Fake's NewTransaction is the one way to get it, and all
	// this adapter keeps of the Fake.
	newTx func() *knftables.Transaction
}

// NewExecInterface returns a knftables.Interface for one family's table
// that runs nft through r. It runs nothing until used. Only
// NewTransaction, Run, Check and List are supported.
func NewExecInterface(r command.Runner, fam dataplane.Family, table string) knftables.Interface {
	return &execInterface{run: r, family: nftFamily(fam), table: table,
		newTx: knftables.NewFake(nftFamily(fam), table).NewTransaction}
}

var errUnsupported = errors.New("not supported by the nft exec adapter")

func (e *execInterface) NewTransaction() *knftables.Transaction { return e.newTx() }

// txText returns the commands of tx, or the error knftables recorded
// while it was built (it appends it as a comment).
func txText(tx *knftables.Transaction) ([]byte, error) {
	s := tx.String()
	if i := strings.LastIndex(s, "# ERROR: "); i >= 0 && !strings.Contains(s[i:], "\n") {
		return nil, fmt.Errorf("invalid transaction: %s", s[i+len("# ERROR: "):])
	}
	return []byte(s), nil
}

func (e *execInterface) Run(ctx context.Context, tx *knftables.Transaction) error {
	text, err := txText(tx)
	if err != nil {
		return err
	}
	_, err = e.run.Run(ctx, []string{"nft", "-f", "-"}, batchElements(text))
	return err
}

func (e *execInterface) Check(ctx context.Context, tx *knftables.Transaction) error {
	text, err := txText(tx)
	if err != nil {
		return err
	}
	_, err = e.run.Run(ctx, []string{"nft", "--check", "-f", "-"}, batchElements(text))
	return err
}

// maxElementBatch bounds the elements joined into one command.
const maxElementBatch = 1000

// batchElements joins each run of adjacent "add element F T S { e }"
// commands for one set into commands of up to maxElementBatch elements,
// which mean the same. knftables writes one command per element, nft
// sends each command as its own netlink message, and the kernel looks the
// set up by name (a walk of the table's list of sets) for every message:
// a 10,000-service full load (120,000 elements) took 4.5 s one per
// command and 3.2 s batched (measured).
func batchElements(text []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(text))
	var head []byte // "add element F T S { " of the open batch
	n := 0
	closeBatch := func() {
		if head != nil {
			out.WriteString(" }\n")
			head, n = nil, 0
		}
	}
	for line := range bytes.Lines(text) {
		h, body, ok := elementCommand(line)
		if ok && head != nil && bytes.Equal(h, head) && n < maxElementBatch {
			out.WriteString(", ")
			out.Write(body)
			n++
			continue
		}
		closeBatch()
		if !ok {
			out.Write(line)
			continue
		}
		head, n = h, 1
		out.Write(h)
		out.Write(body)
	}
	closeBatch()
	return out.Bytes()
}

// elementCommand splits "add element F T S { BODY }\n" into its head (up
// to and including "{ ") and BODY; ok is false for any other line.
func elementCommand(line []byte) (head, body []byte, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("add element ")) || !bytes.HasSuffix(line, []byte(" }")) {
		return nil, nil, false
	}
	i := bytes.Index(line, []byte(" { "))
	if i < 0 {
		return nil, nil, false
	}
	return line[:i+3], line[i+3 : len(line)-2], true
}

// List lists chains, sets or maps of the table. It asks for "list chains
// FAMILY" (or sets, maps) rather than "list table": the table listing
// carries every rule (12 s at 10,000 services, measured), the chain
// listing only names.
func (e *execInterface) List(ctx context.Context, objectType string) ([]string, error) {
	kind := strings.TrimSuffix(objectType, "s")
	switch kind {
	case "chain", "set", "map", "flowtable":
	default:
		return nil, fmt.Errorf("list %s: %w", objectType, errUnsupported)
	}
	out, err := e.run.Run(ctx, []string{"nft", "--json", "--terse", "list", kind + "s", string(e.family)}, nil)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Nftables []map[string]struct {
			Table string `json:"table"`
			Name  string `json:"name"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("parse nft list %ss: %w", kind, err)
	}
	var names []string
	for _, obj := range doc.Nftables {
		if o, ok := obj[kind]; ok && o.Table == e.table {
			names = append(names, o.Name)
		}
	}
	return names, nil
}

func (e *execInterface) ListAll(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	for _, k := range []string{"chain", "set", "map"} {
		names, err := e.List(ctx, k)
		if err != nil {
			return nil, err
		}
		out[k] = names
	}
	return out, nil
}

func (e *execInterface) ListRules(context.Context, string) ([]*knftables.Rule, error) {
	return nil, errUnsupported
}

func (e *execInterface) ListElements(context.Context, string, string) ([]*knftables.Element, error) {
	return nil, errUnsupported
}

func (e *execInterface) ListCounters(context.Context) ([]*knftables.Counter, error) {
	return nil, errUnsupported
}
