package nftables

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// The endpoint maps (see balance and slots.go) over netlink. They are
// fixed maps, created by full syncs through nft; partial syncs add and
// delete their ranges.

// endpointMapTypeOf is the TypeOf of an endpoint map. The port names the
// protocol: with "th dport" nft 1.0.6 accepts the map and a rule using
// it in one transaction but refuses the rule ("conflicting protocols
// specified: tcp vs. th") once the map is read back from the kernel, as
// on every full resync.
func endpointMapTypeOf(fam dataplane.Family, proto dataplane.Protocol) string {
	return fmt.Sprintf("numgen random mod %d : %s daddr . %s dport", slots, ipKeyword(fam), proto)
}

func isEndpointMap(s *Set) bool {
	return s != nil && s.Map && strings.HasPrefix(s.Name, prefixEndpoints) && strings.HasPrefix(s.TypeOf, "numgen random mod ")
}

// isMaglevMap reports whether s is a Maglev map (maglevMap): plain, one
// element per slot, keyed like an endpoint map.
func isMaglevMap(s *Set) bool {
	return s != nil && s.Map && strings.HasPrefix(s.Name, prefixMaglev) && strings.HasPrefix(s.TypeOf, "numgen random mod ") &&
		!isInterval(s)
}

// translateMaglevElement adds or deletes one slot of a Maglev map: the
// key in host byte order (maglevKey) and no interval end.
func translateMaglevElement(verb string, e *knftables.Element, fam dataplane.Family, t *gnft.Table, s *Set) (*nlStep, error) {
	if len(e.Key) != 1 {
		return nil, unsupported("maglev map key %q", e.Key)
	}
	slot, err := maglevSlot(e.Key[0])
	if err != nil {
		return nil, err
	}
	el := gnft.SetElement{Key: maglevKey(slot)}
	set := &gnft.Set{Name: s.Name, Table: t, IsMap: true}
	switch verb {
	case "add":
		if len(e.Value) != 1 {
			return nil, unsupported("element value %q", e.Value)
		}
		if el.Val, err = addrPortData(fam, e.Value[0]); err != nil {
			return nil, err
		}
		return elemStep(set, true, el), nil
	case "delete":
		return elemStep(set, false, el), nil
	}
	return nil, unsupported("%s element", verb)
}

// maglevKey is a slot as the kernel stores it in a Maglev map: in host
// byte order, as jhash leaves it in its register. nft turns numgen's value
// big-endian only for interval maps (their ranges are compared as byte
// strings); a plain map's key is hashed as is (seen on a real kernel:
// slot 0xb8f90000 listed back as 0x0000f9b8).
func maglevKey(slot uint32) []byte {
	return binary.NativeEndian.AppendUint32(nil, slot)
}

// maglevSlot parses a Maglev map key: one slot within the blocks.
func maglevSlot(k string) (uint32, error) {
	n, err := strconv.ParseUint(k, 10, 32)
	if err != nil || n >= maxBlocks*slots || strconv.FormatUint(n, 10) != k {
		return 0, unsupported("slot %q", k)
	}
	return uint32(n), nil
}

// translateEndpointElement adds or deletes one range of an endpoint map.
// An interval is two kernel elements, as nft sends it: the start with the
// data, and the first value past the range flagged as an interval end.
// Keys are numgen's host-order integer turned big-endian (the rule's
// byteorder expression does the same to the drawn number).
func translateEndpointElement(verb string, e *knftables.Element, fam dataplane.Family, t *gnft.Table, s *Set) (*nlStep, error) {
	if len(e.Key) != 1 {
		return nil, unsupported("endpoint map key %q", e.Key)
	}
	lo, hi, err := slotRange(e.Key[0])
	if err != nil {
		return nil, err
	}
	start := gnft.SetElement{Key: binaryutil.BigEndian.PutUint32(lo)}
	end := gnft.SetElement{Key: binaryutil.BigEndian.PutUint32(hi + 1), IntervalEnd: true}
	set := &gnft.Set{Name: s.Name, Table: t, IsMap: true, Interval: true}
	switch verb {
	case "add":
		if len(e.Value) != 1 {
			return nil, unsupported("element value %q", e.Value)
		}
		v, err := addrPortData(fam, e.Value[0])
		if err != nil {
			return nil, err
		}
		start.Val = v
		return elemStep(set, true, start, end), nil
	case "delete":
		return elemStep(set, false, start, end), nil
	}
	return nil, unsupported("%s element", verb)
}

// slotRange parses "lo-hi" within the blocks.
func slotRange(k string) (lo, hi uint32, err error) {
	a, b, ok := strings.Cut(k, "-")
	l, err1 := strconv.ParseUint(a, 10, 32)
	h, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil || l > h || h >= maxBlocks*slots ||
		strconv.FormatUint(l, 10) != a || strconv.FormatUint(h, 10) != b {
		return 0, 0, unsupported("slot range %q", k)
	}
	return uint32(l), uint32(h), nil
}

// addrPortData encodes "ADDR . PORT" as a concatenation: the address,
// then the port in network order padded to 4 bytes.
func addrPortData(fam dataplane.Family, v string) ([]byte, error) {
	parts := strings.Split(v, " . ")
	if len(parts) != 2 {
		return nil, unsupported("endpoint %q", v)
	}
	a, err := familyAddr(fam, parts[0])
	if err != nil {
		return nil, err
	}
	p, err := strconv.ParseUint(parts[1], 10, 16)
	if err != nil || p == 0 || strconv.FormatUint(p, 10) != parts[1] {
		return nil, unsupported("port %q", parts[1])
	}
	return binary.BigEndian.AppendUint32(a.AsSlice(), uint32(p)<<16), nil
}

// translateSetElement adds or deletes an element of the hairpin set,
// keyed by address . address, or of the cluster-ips set, keyed by one
// address (a service added or removed changes both).
func translateSetElement(verb string, e *knftables.Element, fam dataplane.Family, t *gnft.Table, s *Set) (*nlStep, error) {
	key, err := setElementKey(e, fam, s)
	if err != nil {
		return nil, err
	}
	set := &gnft.Set{Name: s.Name, Table: t}
	el := []gnft.SetElement{{Key: key}}
	switch verb {
	case "add":
		return elemStep(set, true, el...), nil
	case "delete":
		return elemStep(set, false, el...), nil
	}
	return nil, unsupported("%s element", verb)
}

// translateAffinitySet creates or deletes a service's per-endpoint
// affinity set: "type ADDR; flags dynamic,timeout; timeout T", which nft
// 1.0.6 sends as key type and length, flags EVAL|TIMEOUT and the timeout,
// nothing else (checked with google/nftables' GetSets on a set nft made).
// Without it, every endpoint change of a ClientIP-affinity service ran
// through nft and its cache (0.66 s at 10,000 services).
func translateAffinitySet(verb string, o *knftables.Set, fam dataplane.Family, t *gnft.Table, sets func(string) *Set) (*nlStep, error) {
	s := sets(o.Name)
	if s == nil || s.Map || !s.Dynamic || s.Type != addrType(fam) || s.TypeOf != "" || s.Timeout <= 0 ||
		!slices.Equal(s.Flags, []knftables.SetFlag{knftables.DynamicFlag, knftables.TimeoutFlag}) {
		return nil, unsupported("%s set %s", verb, o.Name)
	}
	set := &gnft.Set{Table: t, Name: s.Name, KeyType: gnft.TypeIPAddr, Dynamic: true, HasTimeout: true, Timeout: s.Timeout}
	if fam == dataplane.IPv6 {
		set.KeyType = gnft.TypeIP6Addr
	}
	switch verb {
	case "add":
		return call(func(c *gnft.Conn) error { return c.AddSet(set, nil) }), nil
	case "delete":
		return call(func(c *gnft.Conn) error { c.DelSet(set); return nil }), nil
	}
	return nil, unsupported("%s set %s", verb, o.Name)
}

// setElementKey encodes the key of an element of a plain set the
// netlink path knows: an address is its bytes, as nft sends it.
func setElementKey(e *knftables.Element, fam dataplane.Family, s *Set) ([]byte, error) {
	switch {
	case s == nil || s.Map || len(s.Flags) > 0:
		return nil, unsupported("element of set %q", e.Set)
	case s.Name == setHairpin && s.Type == addrType(fam)+" . "+addrType(fam):
		key, err := concatKey(fam, strings.Split(s.Type, " . "), e.Key)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		return key, nil
	case s.Name == setClusterIPs && s.Type == addrType(fam) && len(e.Key) == 1:
		a, err := familyAddr(fam, e.Key[0])
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", s.Name, err)
		}
		return a.AsSlice(), nil
	}
	return nil, unsupported("element of set %q", e.Set)
}
