package ipvs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"
)

// ipset is driven through `ipset save` and `ipset restore -exist` (one
// process per change, however many members), as kube-proxy does.

// readSets parses `ipset save`, keeping our sets only.
func (d *Dataplane) readSets(ctx context.Context) (map[string]*ipset, error) {
	out, err := d.cfg.Runner.Run(ctx, []string{"ipset", "save"}, nil)
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	return parseSets(out), nil
}

func parseSets(out []byte) map[string]*ipset {
	sets := map[string]*ipset{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !isOwnedSet(f[1]) {
			continue
		}
		switch f[0] {
		case "create":
			s := &ipset{name: f[1], typ: f[2], members: map[string]bool{}}
			for i := 3; i+1 < len(f); i++ {
				if f[i] == "family" {
					s.family = f[i+1]
				}
			}
			sets[f[1]] = s
		case "add":
			if s := sets[f[1]]; s != nil {
				s.members[f[2]] = true
			}
		}
	}
	return sets
}

// createLine is the restore line that creates s.
func createLine(s *ipset) string {
	switch {
	case strings.HasPrefix(s.typ, "bitmap:port"):
		return fmt.Sprintf("create %s %s range 0-65535", s.name, s.typ)
	case s.family != "":
		return fmt.Sprintf("create %s %s family %s hashsize 1024 maxelem 65536", s.name, s.typ, s.family)
	}
	return fmt.Sprintf("create %s %s", s.name, s.typ)
}

// setAdditions returns the restore input that creates missing sets and
// adds missing members, and an error for a set of ours whose type differs
// (it cannot be changed while rules refer to it; Cleanup removes it).
func setAdditions(have, want map[string]*ipset) (string, error) {
	var b strings.Builder
	for _, n := range sortedKeys(want) {
		w, h := want[n], have[n]
		if h != nil && (h.typ != w.typ || h.family != w.family) {
			return "", fmt.Errorf("ipset %s is %s %s, want %s %s: run the mode's cleanup", n, h.typ, h.family, w.typ, w.family)
		}
		if h == nil {
			b.WriteString(createLine(w) + "\n")
		}
		for _, m := range sortedKeys(w.members) {
			if h == nil || !h.members[m] {
				fmt.Fprintf(&b, "add %s %s\n", n, m)
			}
		}
	}
	return b.String(), nil
}

// setRemovals returns the restore input that deletes members the state no
// longer wants. Sets themselves stay: they are fixed (Cleanup destroys them).
func setRemovals(have, want map[string]*ipset) string {
	var b strings.Builder
	for _, n := range sortedKeys(have) {
		w := want[n]
		if w == nil {
			continue
		}
		for _, m := range sortedKeys(have[n].members) {
			if !w.members[m] {
				fmt.Fprintf(&b, "del %s %s\n", n, m)
			}
		}
	}
	return b.String()
}

func (d *Dataplane) ipsetRestore(ctx context.Context, payload string) error {
	if payload == "" {
		return nil
	}
	if _, err := d.cfg.Runner.Run(ctx, []string{"ipset", "restore", "-exist"}, []byte(payload)); err != nil {
		return fmt.Errorf("ipset restore: %w", err)
	}
	d.stats.IPSetRestores++
	return nil
}

func cloneSet(s *ipset) *ipset {
	c := *s
	c.members = make(map[string]bool, len(s.members))
	for m := range s.members {
		c.members[m] = true
	}
	return &c
}
