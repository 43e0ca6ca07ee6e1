package iptablestest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset/ipsettest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtinfo"
)

// Call is one command the Fake ran.
type Call struct {
	Argv  []string
	Stdin string
}

// Fake implements command.Runner in memory.
type Fake struct {
	// Fail, when set, is consulted before each command; a non-nil error is
	// returned instead of running it.
	Fail func(argv []string, stdin []byte) error

	// CheckSetRefs makes a restore fail, as the kernel does, when a rule
	// it adds matches an ipset (-m set --match-set) that does not exist in
	// this Fake. Off by default: ipvstest wraps this Fake and keeps its
	// own sets, so its restores name sets this Fake never sees.
	CheckSetRefs bool

	mu    sync.Mutex
	fams  map[string]tables // "iptables" or "ip6tables"
	sets  *ipsettest.Fake   // one namespace-wide list, as in the kernel
	calls []Call
	gen   uint32 // see Generation
}

type chain struct {
	builtin bool
	rules   []string
}

type table map[string]*chain

type tables map[string]table

var builtins = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
}

var targets = map[string]bool{
	"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true, "DNAT": true,
	"SNAT": true, "MASQUERADE": true, "MARK": true, "LOG": true, "CONNMARK": true,
}

// New returns an empty Fake: filter and nat with empty built-in chains.
func New() *Fake {
	f := &Fake{fams: map[string]tables{}, sets: ipsettest.New()}
	f.sets.InUse = f.setInUse
	return f
}

// ErrNotFound is returned for commands the Fake does not implement.
var ErrNotFound = errors.New("executable file not found")

func newTable(name string) table {
	t := table{}
	for _, b := range builtins[name] {
		t[b] = &chain{builtin: true}
	}
	return t
}

func (f *Fake) family(name string) tables {
	ts, ok := f.fams[name]
	if !ok {
		ts = tables{"filter": newTable("filter"), "nat": newTable("nat")}
		f.fams[name] = ts
	}
	return ts
}

// Run implements command.Runner for *-restore, *-save and ipset (through
// the ipset fake, with f.mu held for its InUse hook).
func (f *Fake) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, Call{Argv: slices.Clone(argv), Stdin: string(stdin)})
	if f.Fail != nil {
		if err := f.Fail(argv, stdin); err != nil {
			return nil, err
		}
	}
	if len(argv) == 0 {
		return nil, ErrNotFound
	}
	if argv[0] == "ipset" {
		return f.sets.Run(ctx, argv, stdin)
	}
	bin := argv[0]
	for _, sfx := range []string{"-legacy", "-nft"} {
		bin = strings.Replace(bin, sfx+"-", "-", 1)
	}
	fam, cmd, ok := strings.Cut(bin, "-")
	if !ok || (fam != "iptables" && fam != "ip6tables") {
		return nil, fmt.Errorf("%s: %w", argv[0], ErrNotFound)
	}
	switch cmd {
	case "save":
		only := ""
		for i, a := range argv {
			if a == "-t" && i+1 < len(argv) {
				only = argv[i+1]
			}
		}
		return []byte(dump(f.family(fam), only)), nil
	case "restore":
		noflush := slices.Contains(argv, "--noflush") || slices.Contains(argv, "-n")
		return nil, f.restore(fam, string(stdin), noflush)
	}
	return nil, fmt.Errorf("%s: %w", argv[0], ErrNotFound)
}

// Generation is the namespace's nf_tables ruleset generation as
// iptables-nft moves it (iptables.Config.Generation): every table block
// of a restore that holds a line is one transaction and bumps it, an
// empty block commits nothing, and ipset is not nf_tables. It starts at 1.
func (f *Fake) Generation(context.Context) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen + 1, nil
}

// LegacyInfo is what the kernel's x_tables info (iptables.Config.LegacyInfo)
// tells of a table: Entries counts its chains (a head each, and a policy
// or return entry for user chains) and rules, Size their text. It
// changes with the number of rules and chains and with their length, as
// the kernel's does; ENOENT for a table the family does not have.
func (f *Fake) LegacyInfo(_ context.Context, ipv6 bool, table string) (xtinfo.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fam := "iptables"
	if ipv6 {
		fam = "ip6tables"
	}
	t, ok := f.family(fam)[table]
	if !ok {
		return xtinfo.Info{}, unix.ENOENT
	}
	var in xtinfo.Info
	for n, c := range t {
		in.Entries += 1 + uint32(len(c.rules))
		in.Size += uint32(len(n))
		if !c.builtin {
			in.Entries++
		}
		for _, r := range c.rules {
			in.Size += uint32(len(r))
		}
	}
	return in, nil
}

// Calls returns the commands run so far.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// ResetCalls forgets the recorded commands.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// Dump prints every family in iptables-save syntax, stably sorted.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, n := range sorted.Keys(f.fams) {
		fmt.Fprintf(&b, "# %s\n%s", n, dump(f.fams[n], ""))
	}
	if sets := f.sets.Save(); sets != "" {
		fmt.Fprintf(&b, "# ipset\n%s", sets)
	}
	return b.String()
}

// Insert adds a foreign rule, as other software would (tests of Cleanup).
func (f *Fake) Insert(fam, tbl, ch, rule string) error {
	return f.Restore(fam, fmt.Sprintf("*%s\n-A %s %s\nCOMMIT\n", tbl, ch, rule))
}

// Restore applies restore input with --noflush to family fam.
func (f *Fake) Restore(fam, input string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restore(fam, input, true)
}

func dump(ts tables, only string) string {
	names := make([]string, 0, len(ts))
	for n := range ts {
		if only == "" || n == only {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, tn := range names {
		t := ts[tn]
		fmt.Fprintf(&b, "*%s\n", tn)
		order := chainOrder(tn, t)
		for _, cn := range order {
			pol := "-"
			if t[cn].builtin {
				pol = "ACCEPT"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", cn, pol)
		}
		for _, cn := range order {
			for _, r := range t[cn].rules {
				fmt.Fprintf(&b, "-A %s %s\n", cn, r)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

func chainOrder(tn string, t table) []string {
	var bs, us []string
	for _, b := range builtins[tn] {
		if _, ok := t[b]; ok {
			bs = append(bs, b)
		}
	}
	for n, c := range t {
		if !c.builtin {
			us = append(us, n)
		}
	}
	sort.Strings(us)
	return append(bs, us...)
}

func clone(t table) table {
	c := make(table, len(t))
	for n, ch := range t {
		c[n] = &chain{builtin: ch.builtin, rules: slices.Clone(ch.rules)}
	}
	return c
}

func target(rule string) string {
	f := strings.Fields(rule)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "-j" || f[i] == "-g" {
			return f[i+1]
		}
	}
	return ""
}

// restore applies input; every table block commits atomically.
func (f *Fake) restore(fam, input string, noflush bool) error {
	ts := f.family(fam)
	var cur table
	var curName string
	lines := 0
	for i, line := range strings.Split(input, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lerr := func(err error) error { return fmt.Errorf("line %d %q: %w", i+1, line, err) }
		switch {
		case strings.HasPrefix(line, "*"):
			curName = line[1:]
			old, ok := ts[curName]
			if !ok || !noflush {
				old = newTable(curName)
			}
			cur = clone(old)
			lines = 0
		case cur == nil:
			return lerr(errors.New("rule outside a table"))
		case line == "COMMIT":
			if err := check(cur); err != nil {
				return lerr(err)
			}
			if err := f.checkSets(cur); err != nil {
				return lerr(err)
			}
			ts[curName] = cur
			cur = nil
			if lines > 0 || !noflush {
				f.gen++
			}
		default:
			lines++
			if err := apply(cur, line); err != nil {
				return lerr(err)
			}
		}
	}
	if cur != nil {
		return errors.New("missing COMMIT")
	}
	return nil
}

// check verifies every jump in t targets a chain or a known target.
func check(t table) error {
	for n, c := range t {
		for _, r := range c.rules {
			tg := target(r)
			if tg == "" || targets[tg] {
				continue
			}
			if _, ok := t[tg]; !ok {
				return fmt.Errorf("chain %s jumps to missing %s", n, tg)
			}
		}
	}
	return nil
}

func apply(t table, line string) error {
	if strings.HasPrefix(line, ":") {
		name, _, _ := strings.Cut(line[1:], " ")
		if c, ok := t[name]; ok {
			c.rules = nil
		} else {
			t[name] = &chain{}
		}
		return nil
	}
	op, rest, _ := strings.Cut(line, " ")
	name, rule, _ := strings.Cut(rest, " ")
	c, ok := t[name]
	if !ok {
		return fmt.Errorf("no chain %s", name)
	}
	switch op {
	case "-A":
		c.rules = append(c.rules, rule)
	case "-I":
		pos := 1
		if n, r, ok := strings.Cut(rule, " "); ok {
			if p, err := strconv.Atoi(n); err == nil {
				pos, rule = p, r
			}
		}
		if pos < 1 || pos > len(c.rules)+1 {
			return fmt.Errorf("bad position %d", pos)
		}
		c.rules = slices.Insert(c.rules, pos-1, rule)
	case "-D":
		i := slices.Index(c.rules, rule)
		if i < 0 {
			return errors.New("no such rule")
		}
		c.rules = slices.Delete(c.rules, i, i+1)
	case "-F":
		c.rules = nil
	case "-X":
		if c.builtin {
			return errors.New("cannot delete built-in chain")
		}
		for on, oc := range t {
			for _, r := range oc.rules {
				if target(r) == name && on != name {
					return fmt.Errorf("chain %s still referenced by %s", name, on)
				}
			}
		}
		if len(c.rules) > 0 {
			return fmt.Errorf("chain %s not empty", name)
		}
		delete(t, name)
	default:
		return fmt.Errorf("unknown command %s", op)
	}
	return nil
}
