package nftables

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"sigs.k8s.io/knftables"
)

// Runner runs one command with stdin and returns its stdout. It is the
// seam between this package and the kernel, bound to one network
// namespace: everything it runs must run there.
type Runner interface {
	Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error)
}

// ExecRunner runs commands with os/exec, each prefixed with Prefix (for
// example "ip", "netns", "exec", "NS"; empty to run in the namespace of
// this process, as the agent on its node does).
type ExecRunner struct {
	Prefix []string
}

var _ Runner = ExecRunner{}

// RunError is a command that failed, with its stderr.
type RunError struct {
	Argv   []string
	Stderr string
	Err    error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.Argv, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *RunError) Unwrap() error { return e.Err }

// Run implements Runner.
func (r ExecRunner) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	full := append(append([]string(nil), r.Prefix...), argv...)
	if len(full) == 0 {
		return nil, errors.New("empty command")
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), &RunError{Argv: argv, Stderr: errb.String(), Err: err}
	}
	return out.Bytes(), nil
}

// IsNotFound reports whether err says a table, chain, set or element does
// not exist, from knftables (Fake) or from nft run through a Runner.
func IsNotFound(err error) bool {
	if knftables.IsNotFound(err) {
		return true
	}
	var re *RunError
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
	run    Runner
	family knftables.Family
	table  string
	// txCtx only lends its family and table to new transactions: a
	// Transaction's context is not settable from outside knftables.
	txCtx *knftables.Fake
}

// NewExecInterface returns a knftables.Interface for one family's table
// that runs nft through r. It runs nothing until used. Only
// NewTransaction, Run, Check and List are supported.
func NewExecInterface(r Runner, fam Family, table string) knftables.Interface {
	return &execInterface{run: r, family: fam.nft(), table: table, txCtx: knftables.NewFake(fam.nft(), table)}
}

var errUnsupported = errors.New("not supported by the nft exec adapter")

func (e *execInterface) NewTransaction() *knftables.Transaction { return e.txCtx.NewTransaction() }

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
	_, err = e.run.Run(ctx, []string{"nft", "-f", "-"}, text)
	return err
}

func (e *execInterface) Check(ctx context.Context, tx *knftables.Transaction) error {
	text, err := txText(tx)
	if err != nil {
		return err
	}
	_, err = e.run.Run(ctx, []string{"nft", "--check", "-f", "-"}, text)
	return err
}

// List lists chains, sets or maps of the table. It asks for "list chains
// FAMILY" (or sets, maps) rather than "list table": the table listing
// carries every rule (12 s at 10,000 services, measured), the chain
// listing only names.
func (e *execInterface) List(ctx context.Context, objectType string) ([]string, error) {
	kind := strings.TrimSuffix(objectType, "s")
	switch kind {
	case "chain", "set", "map":
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
