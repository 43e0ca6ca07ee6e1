package ipvstest

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Run implements iptables.Runner: "ipset save" and "ipset restore [-exist]"
// here, iptables and ip6tables binaries in the iptablestest.Fake (after
// checking that every set a restore matches exists, as the kernel does).
func (f *Fake) Run(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	desc := strings.Join(argv, " ")
	mutating := !strings.HasSuffix(argv[0], "-save") && !(argv[0] == "ipset" && len(argv) > 1 && argv[1] == "save")
	if argv[0] != "ipset" {
		f.mu.Lock()
		err := f.record(mutating, "%s", desc)
		if err == nil && mutating {
			err = f.checkSetsUsed(string(stdin))
		}
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return f.ipt.Run(ctx, argv, stdin)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(mutating, "%s", desc); err != nil {
		return nil, err
	}
	switch {
	case len(argv) >= 2 && argv[1] == "save":
		return []byte(f.ipsetSave()), nil
	case len(argv) >= 2 && argv[1] == "restore":
		return nil, f.ipsetRestore(string(stdin), slices.Contains(argv, "-exist"))
	}
	return nil, fmt.Errorf("ipset %v: not implemented by the fake", argv[1:])
}

var matchSet = regexp.MustCompile(`--match-set (\S+)`)

func (f *Fake) checkSetsUsed(payload string) error {
	for _, m := range matchSet.FindAllStringSubmatch(payload, -1) {
		if _, ok := f.sets[m[1]]; !ok {
			return fmt.Errorf("iptables-restore: Set %s doesn't exist", m[1])
		}
	}
	return nil
}

func (f *Fake) ipsetSave() string {
	var b strings.Builder
	for _, n := range sortedKeys(f.sets) {
		s := f.sets[n]
		switch {
		case s.typ == "bitmap:port":
			fmt.Fprintf(&b, "create %s %s range 0-65535\n", n, s.typ)
		default:
			fmt.Fprintf(&b, "create %s %s family %s hashsize 1024 maxelem 65536 bucketsize 12\n", n, s.typ, s.family)
		}
		for _, m := range sortedKeys(s.members) {
			fmt.Fprintf(&b, "add %s %s\n", n, m)
		}
	}
	return b.String()
}

// ipsetRestore applies restore input line by line; like ipset, it stops
// at the first error (what came before stays).
func (f *Fake) ipsetRestore(input string, exist bool) error {
	for i, line := range strings.Split(input, "\n") {
		fl := strings.Fields(line)
		if len(fl) == 0 || strings.HasPrefix(fl[0], "#") {
			continue
		}
		if err := f.ipsetLine(fl, exist); err != nil {
			return fmt.Errorf("ipset restore line %d %q: %w", i+1, line, err)
		}
	}
	return nil
}

func (f *Fake) ipsetLine(fl []string, exist bool) error {
	if len(fl) < 2 {
		return fmt.Errorf("syntax error")
	}
	cmd, name := fl[0], fl[1]
	s, ok := f.sets[name]
	if cmd != "create" && !ok {
		return fmt.Errorf("the set with the given name does not exist")
	}
	switch cmd {
	case "create":
		if len(fl) < 3 || len(name) > 31 {
			return fmt.Errorf("bad create")
		}
		fam := ""
		for i := 3; i+1 < len(fl); i++ {
			if fl[i] == "family" {
				fam = fl[i+1]
			}
		}
		if strings.HasPrefix(fl[2], "hash:") && fam == "" {
			fam = "inet"
		}
		if ok {
			if !exist || s.typ != fl[2] || s.family != fam {
				return fmt.Errorf("set with the same name already exists")
			}
			return nil
		}
		f.sets[name] = &set{typ: fl[2], family: fam, members: map[string]bool{}}
	case "add", "del":
		if len(fl) != 3 {
			return fmt.Errorf("syntax error")
		}
		if err := validMember(s, fl[2]); err != nil {
			return err
		}
		has := s.members[fl[2]]
		switch {
		case cmd == "add" && has && !exist:
			return fmt.Errorf("element is already added")
		case cmd == "del" && !has && !exist:
			return fmt.Errorf("element is missing")
		case cmd == "add":
			s.members[fl[2]] = true
		default:
			delete(s.members, fl[2])
		}
	case "flush":
		clear(s.members)
	case "destroy":
		if strings.Contains(f.ipt.Dump(), "--match-set "+name+" ") {
			return fmt.Errorf("set cannot be destroyed: it is in use by a kernel component")
		}
		delete(f.sets, name)
	default:
		return fmt.Errorf("unknown command %s", cmd)
	}
	return nil
}

// validMember checks m against the set's type and family, in the
// spelling ipset save uses.
func validMember(s *set, m string) error {
	bad := fmt.Errorf("bad %s member %q", s.typ, m)
	addr := func(x string) bool {
		a, err := netip.ParseAddr(x)
		return err == nil && a.String() == x && a.Is4() == (s.family == "inet")
	}
	protoPort := func(x string) bool {
		p, n, ok := strings.Cut(x, ":")
		v, err := strconv.Atoi(n)
		return ok && (p == "tcp" || p == "udp" || p == "sctp") && err == nil && v > 0 && v < 65536
	}
	netw := func(x string) bool {
		if addr(x) {
			return true
		}
		p, err := netip.ParsePrefix(x)
		return err == nil && p.Masked().String() == x && !p.IsSingleIP() && p.Addr().Is4() == (s.family == "inet")
	}
	parts := strings.Split(m, ",")
	ok := false
	switch s.typ {
	case "bitmap:port":
		v, err := strconv.Atoi(m)
		ok = err == nil && v >= 0 && v < 65536 && strconv.Itoa(v) == m
	case "hash:ip":
		ok = addr(m)
	case "hash:net":
		ok = netw(m)
	case "hash:ip,port":
		ok = len(parts) == 2 && addr(parts[0]) && protoPort(parts[1])
	case "hash:ip,port,ip":
		ok = len(parts) == 3 && addr(parts[0]) && protoPort(parts[1]) && addr(parts[2])
	case "hash:ip,port,net":
		ok = len(parts) == 3 && addr(parts[0]) && protoPort(parts[1]) && netw(parts[2])
	}
	if !ok {
		return bad
	}
	return nil
}

// SetMembers returns the members of a set, sorted; nil when it does not
// exist.
func (f *Fake) SetMembers(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sets[name]
	if !ok {
		return nil
	}
	return sortedKeys(s.members)
}

// AddForeignSet creates a set as other software would.
func (f *Fake) AddForeignSet(name, typ, family string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &set{typ: typ, family: family, members: map[string]bool{}}
	for _, m := range members {
		s.members[m] = true
	}
	f.sets[name] = s
}

// Dump prints the whole state, stably sorted: links and addresses,
// virtual servers with their real servers, ipsets with their members,
// then the iptables tables of each family. Empty sets print on one line.
func (f *Fake) Dump() string {
	f.mu.Lock()
	var b strings.Builder
	for _, n := range sortedKeys(f.links) {
		l := f.links[n]
		state := "down"
		if l.up {
			state = "up"
		}
		fmt.Fprintf(&b, "link %s %s %s\n", n, l.typ, state)
		for _, a := range sortedAddrs(l.addrs) {
			fmt.Fprintf(&b, "  addr %s\n", a)
		}
	}
	for _, k := range f.vsKeys() {
		v := f.vs[k]
		fmt.Fprintf(&b, "vs %s\n", vsDesc(v.vs))
		for _, a := range rsKeys(v) {
			rs := v.rs[a]
			fmt.Fprintf(&b, "  -> %s masq weight %d", a, rs.Weight)
			if rs.ActiveConns+rs.InactiveConns > 0 {
				fmt.Fprintf(&b, " conns %d/%d", rs.ActiveConns, rs.InactiveConns)
			}
			b.WriteString("\n")
		}
	}
	for _, n := range sortedKeys(f.sets) {
		s := f.sets[n]
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(fmt.Sprintf("ipset %s %s %s", n, s.typ, s.family)))
		for _, m := range sortedKeys(s.members) {
			fmt.Fprintf(&b, "  %s\n", m)
		}
	}
	f.mu.Unlock()
	b.WriteString(f.ipt.Dump())
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedAddrs(m map[netip.Addr]bool) []netip.Addr {
	keys := make([]netip.Addr, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, netip.Addr.Compare)
	return keys
}
