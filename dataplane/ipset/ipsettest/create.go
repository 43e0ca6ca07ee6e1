package ipsettest

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// defaultMaxElem is ipset's default maxelem for hash sets.
const defaultMaxElem = 65536

// types are the set types the fake knows: the union of what the modes
// create (the iptables mode's hairpin set is hash:ip,port,ip; the ipvs
// mode uses all of them). Creating any other type fails, as a typo in a
// type name does with ipset.
var types = map[string]bool{
	"hash:ip": true, "hash:net": true, "hash:ip,port": true, "hash:ip,port,ip": true,
	"hash:ip,port,net": true, "bitmap:port": true,
}

func isBitmap(typ string) bool { return strings.HasPrefix(typ, "bitmap:") }

// create applies "create NAME TYPE [options]"; s is the set of that name
// if it exists. With exist, creating a set identical to the present one
// is a no-op; anything else that exists is refused, as the kernel
// refuses to change a set's type or size in place.
func (f *Fake) create(fl []string, s *set, exist bool) error {
	if len(fl) < 3 {
		return errors.New("Syntax error: missing set type")
	}
	if len(fl[1]) > 31 {
		return fmt.Errorf("Syntax error: setname '%s' is longer than 31 characters", fl[1])
	}
	if !types[fl[2]] {
		return fmt.Errorf("Syntax error: typename '%s' is unknown", fl[2])
	}
	n := &set{typ: fl[2], maxelem: defaultMaxElem, lo: -1, members: map[string]bool{}}
	for i := 3; i+1 < len(fl); i++ {
		switch v := fl[i+1]; fl[i] {
		case "family":
			n.family = v
		case "maxelem":
			m, err := strconv.Atoi(v)
			if err != nil || m < 1 {
				return fmt.Errorf("Syntax error: bad maxelem %q", v)
			}
			n.maxelem = m
		case "range":
			lo, hi, ok := strings.Cut(v, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if !ok || err1 != nil || err2 != nil || a < 0 || b > 65535 || a > b {
				return fmt.Errorf("Syntax error: bad range %q", v)
			}
			n.lo, n.hi = a, b
		}
	}
	switch {
	case isBitmap(n.typ) && n.lo < 0:
		return errors.New("Syntax error: Missing mandatory option: range")
	case isBitmap(n.typ) && n.family != "":
		return errors.New("Syntax error: family is not valid for bitmap sets")
	case !isBitmap(n.typ) && n.family == "":
		n.family = "inet"
	case !isBitmap(n.typ) && n.family != "inet" && n.family != "inet6":
		return fmt.Errorf("Syntax error: unknown family %q", n.family)
	}
	if !isBitmap(n.typ) {
		n.lo, n.hi = 0, 0 // no range: compare equal to AddSet's
	}
	if s != nil {
		same := s.typ == n.typ && s.family == n.family && s.maxelem == n.maxelem && s.lo == n.lo && s.hi == n.hi
		if !exist || !same {
			return errors.New("Set cannot be created: set with the same name already exists")
		}
		return nil
	}
	f.sets[fl[1]] = n
	return nil
}

// validMember checks m against the set's type and family, in the spelling
// ipset save prints: addresses as netip prints them, "proto:port" with
// tcp, udp or sctp and a port without leading zeros, networks masked and
// host networks as bare addresses.
func (s *set) validMember(m string) error {
	addr := func(x string) bool {
		a, err := netip.ParseAddr(x)
		return err == nil && a.String() == x && a.Is4() == (s.family == "inet")
	}
	port := func(x string, lo int) bool {
		v, err := strconv.Atoi(x)
		return err == nil && strconv.Itoa(v) == x && v >= lo && v <= 65535
	}
	protoPort := func(x string) bool {
		p, n, ok := strings.Cut(x, ":")
		return ok && (p == "tcp" || p == "udp" || p == "sctp") && port(n, 1)
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
		ok = port(m, 0) && err == nil && v >= s.lo && v <= s.hi
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
		return fmt.Errorf("Syntax error: bad %s member %q", s.typ, m)
	}
	return nil
}
