// Package ipset drives the ipset binary for the dataplane modes that keep
// match sets in the kernel: the iptables mode's hairpin sets and the ipvs
// mode's sets. Both drive it as kube-proxy's IPVS mode does: `ipset save`
// to read sets back, `ipset restore -exist` to change them (one process
// per step, however many members), through the command.Runner seam so
// that each mode tests against a fake and runs in a chosen namespace.
//
// It exists so that the two modes share one reading of save output, one
// create line, one member diff and one restore, instead of each carrying
// its own copy. Policy stays in the modes: which sets they own, when a
// change is applied relative to their rules, what they count and how
// they clean up.
package ipset

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
)

// Spec is what creates a set.
type Spec struct {
	Name, Type string
	// Family is "inet" or "inet6" (see Family) for hash types, empty for
	// bitmap types.
	Family string
	// MaxElem bounds a hash set; 0 is ipset's default, 65536. Save does
	// not read it back: no mode repairs it.
	MaxElem int
}

// Family is the "family" option of a hash set that holds addresses of f.
func Family(f dataplane.Family) string {
	if f == dataplane.IPv6 {
		return "inet6"
	}
	return "inet"
}

// defaultMaxElem is ipset's own default, written out so that the create
// line says what the set gets.
const defaultMaxElem = 65536

// CreateLine is the restore line that creates the set. bitmap:port sets
// span every port, so that any node port fits.
func (s Spec) CreateLine() string {
	switch {
	case strings.HasPrefix(s.Type, "bitmap:port"):
		return fmt.Sprintf("create %s %s range 0-65535", s.Name, s.Type)
	case s.Family != "":
		maxElem := s.MaxElem
		if maxElem == 0 {
			maxElem = defaultMaxElem
		}
		return fmt.Sprintf("create %s %s family %s hashsize 1024 maxelem %d", s.Name, s.Type, s.Family, maxElem)
	}
	return fmt.Sprintf("create %s %s", s.Name, s.Type)
}

// Check returns an error when the set the kernel has differs in type or
// family from s. Neither `create -exist` nor swap changes the type of a
// set that rules still match, so the way out is the mode's cleanup
// (which removes the rules and then the set).
func (s Spec) Check(have Spec) error {
	if have.Type == s.Type && have.Family == s.Family {
		return nil
	}
	return fmt.Errorf("ipset %s is %s, want %s: run the mode's cleanup", s.Name, have.describe(), s.describe())
}

func (s Spec) describe() string {
	if s.Family == "" {
		return s.Type
	}
	return s.Type + " family " + s.Family
}

// Set is one set: its Spec and members in the spelling ipset save prints.
type Set struct {
	Spec
	Members map[string]bool
}

// Clone returns a copy of s whose members can change independently.
func (s *Set) Clone() *Set {
	c := &Set{Spec: s.Spec, Members: make(map[string]bool, len(s.Members))}
	for m := range s.Members {
		c.Members[m] = true
	}
	return c
}

// Restore runs payload through `ipset restore -exist` (-exist so that
// creating a present set, adding a present member or deleting a missing
// one is not an error: a retried step converges). An empty payload runs
// nothing. count, when not nil, is incremented for each restore that ran
// and succeeded; the modes report it in their sync statistics.
func Restore(ctx context.Context, r command.Runner, payload string, count *int) error {
	if payload == "" {
		return nil
	}
	if _, err := r.Run(ctx, []string{"ipset", "restore", "-exist"}, []byte(payload)); err != nil {
		return fmt.Errorf("ipset restore: %w", err)
	}
	if count != nil {
		*count++
	}
	return nil
}

// Save reads back, with one `ipset save`, the sets whose name keep
// accepts (ipset names are global to a namespace; other software's sets
// are not the caller's business).
func Save(ctx context.Context, r command.Runner, keep func(name string) bool) (map[string]*Set, error) {
	out, err := r.Run(ctx, []string{"ipset", "save"}, nil)
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	return Parse(out, keep), nil
}

// SaveSet reads back one set with `ipset save NAME`, which costs only
// that set's members; nil when it does not exist.
func SaveSet(ctx context.Context, r command.Runner, name string) (*Set, error) {
	out, err := r.Run(ctx, []string{"ipset", "save", name}, nil)
	if err != nil {
		// ipset says "The set with the given name does not exist" and
		// exits 1, like any other failure.
		if strings.Contains(err.Error(), "does not exist") {
			return nil, nil
		}
		return nil, fmt.Errorf("read back ipset %s: %w", name, err)
	}
	s := Parse(out, func(n string) bool { return n == name })[name]
	if s == nil {
		return nil, fmt.Errorf("read back ipset %s: no create line in ipset save output", name)
	}
	return s, nil
}

// Parse parses `ipset save` output, keeping the sets whose name keep
// accepts. Members stay in the spelling ipset printed: the modes render
// members in that spelling, so equal sets compare equal.
func Parse(out []byte, keep func(name string) bool) map[string]*Set {
	sets := map[string]*Set{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	// A member line is short, but the default 64 KiB limit would make a
	// pathological line end the scan early and read as missing members.
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !keep(f[1]) {
			continue
		}
		switch f[0] {
		case "create":
			s := &Set{Spec: Spec{Name: f[1], Type: f[2]}, Members: map[string]bool{}}
			for i := 3; i+1 < len(f); i++ {
				if f[i] == "family" {
					s.Family = f[i+1]
				}
			}
			sets[f[1]] = s
		case "add":
			if s := sets[f[1]]; s != nil {
				s.Members[f[2]] = true
			}
		}
	}
	return sets
}
