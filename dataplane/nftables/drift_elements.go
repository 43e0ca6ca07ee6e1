package nftables

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// Elements in a comparable form. The rendered elements (text) and the
// kernel's (bytes) are both turned into strings of the kernel's bytes
// (not printable; reports spell them with elemLabel), with the encoders
// the netlink path uses to write them (netlink.go, netlink_map.go), so
// "equal" means what the kernel matches on:
//
//   - plain sets and verdict maps: the key bytes, "=" and the verdict
//     ("goto svc-…") for a map;
//   - Maglev maps: each slot's key "=" its address . port data;
//   - endpoint maps: each range's start key "=" its address . port data.
//     The kernel keeps a range as a start element carrying the data and
//     an end element (nft may leave out an end that another range's
//     start makes redundant), so the ends are not compared;
//   - other interval sets (cluster, node port and service CIDRs): the
//     intervals [start, end) they cover, overlapping and adjacent ones
//     merged, so nft's layout (automerge, the "0 [end]" element of a set
//     it did not flush first) does not count as a difference;
//   - dynamic (affinity) sets: nothing; the packet path fills them.

// wantElements returns the comparable elements of a rendered set,
// sorted, and each one's text ("key" or "key : value") for reports.
func wantElements(fam dataplane.Family, s *Set, elems map[string]string) ([]string, map[string]string, error) {
	var out []string
	text := map[string]string{}
	add := func(e, k, v string) {
		out = append(out, e)
		if v != "" {
			k += " : " + v
		}
		text[e] = k
	}
	switch {
	case s.Dynamic:
		return nil, nil, nil
	case isEndpointMap(s), isMaglevMap(s):
		for k, v := range elems {
			var lo uint32
			var err error
			if isMaglevMap(s) {
				lo, err = maglevSlot(k)
			} else {
				lo, _, err = slotRange(k)
			}
			if err != nil {
				return nil, nil, err
			}
			val, err := addrPortData(fam, v)
			if err != nil {
				return nil, nil, err
			}
			key := binary.BigEndian.AppendUint32(nil, lo)
			if isMaglevMap(s) {
				key = maglevKey(lo)
			}
			add(string(key)+"="+string(val), k, v)
		}
	case isInterval(s) && !s.Map:
		// Merged intervals have no one text; elemLabel spells them.
		var ivs []interval
		for k := range elems {
			iv, err := prefixInterval(fam, k)
			if err != nil {
				return nil, nil, err
			}
			ivs = append(ivs, iv)
		}
		return mergeIntervals(ivs), nil, nil
	default:
		typ, verdictMap := strings.CutSuffix(s.Type, " : verdict")
		if s.Map && !verdictMap || s.TypeOf != "" {
			return nil, nil, unsupported("elements of %s", s.Name)
		}
		for k, v := range elems {
			key, err := encodeKey(fam, typ, k)
			if err != nil {
				return nil, nil, err
			}
			e := string(key)
			if verdictMap {
				v = strings.Join(strings.Fields(v), " ")
				e += "=" + v
			}
			add(e, k, v)
		}
	}
	slices.Sort(out)
	return out, text, nil
}

// gotElements returns the comparable elements of a kernel set, read as
// the rendered set s says it is.
func gotElements(s *Set, ks *kernelSet) []string {
	var out []string
	switch {
	case s.Dynamic:
		return nil
	case isEndpointMap(s), isMaglevMap(s):
		for _, e := range ks.elems {
			if !e.end {
				out = append(out, string(e.key)+"="+string(e.val))
			}
		}
	case isInterval(s) && !s.Map:
		return kernelIntervals(ks.elems)
	default:
		verdictMap := strings.HasSuffix(s.Type, " : verdict")
		for _, e := range ks.elems {
			el := string(e.key)
			if verdictMap {
				el += "=" + decodeVerdict(e.val)
			}
			out = append(out, el)
		}
	}
	slices.Sort(out)
	return out
}

func isInterval(s *Set) bool { return slices.Contains(s.Flags, knftables.IntervalFlag) }

// encodeKey encodes a set key of type typ as nft does.
func encodeKey(fam dataplane.Family, typ, key string) ([]byte, error) {
	if typ == addrType(fam) {
		a, err := familyAddr(fam, key)
		if err != nil {
			return nil, err
		}
		return a.AsSlice(), nil
	}
	return concatKey(fam, strings.Split(typ, " . "), strings.Split(key, " . "))
}

// Verdict codes of NFTA_VERDICT_CODE (linux/netfilter.h and nf_tables.h).
var verdictCodes = map[int32]string{0: "drop", 1: "accept", -1: "continue", -2: "break", -3: "jump", -4: "goto", -5: "return"}

// decodeVerdict turns a verdict map's element data (the nested
// NFTA_VERDICT_* attributes) into its nft text: "goto svc-…", "drop".
func decodeVerdict(b []byte) string {
	ad, err := nfAttrs(b)
	if err != nil {
		return "?" + hex.EncodeToString(b)
	}
	code, chain := "?", ""
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			c := int32(ad.Uint32())
			if n, ok := verdictCodes[c]; ok {
				code = n
			} else {
				code = "verdict" + strconv.Itoa(int(c))
			}
		case unix.NFTA_VERDICT_CHAIN:
			chain = ad.String()
		}
	}
	if ad.Err() != nil {
		return "?" + hex.EncodeToString(b)
	}
	if chain != "" {
		return code + " " + chain
	}
	return code
}

// interval is [start, end) as big-endian bytes; end nil: up to the top
// of the address space.
type interval struct{ start, end []byte }

// prefixInterval is the interval an address or prefix covers.
func prefixInterval(fam dataplane.Family, s string) (interval, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		a, err := familyAddr(fam, s)
		if err != nil {
			return interval{}, err
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	start := p.Addr().AsSlice()
	end := slices.Clone(start)
	for i := range end { // the last address of the prefix
		if bits := p.Bits() - i*8; bits < 8 {
			end[i] |= byte(0xff >> max(bits, 0))
		}
	}
	return interval{start: start, end: increment(end)}, nil
}

// increment returns b + 1, nil when it overflows.
func increment(b []byte) []byte {
	out := slices.Clone(b)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			return out
		}
	}
	return nil
}

// kernelIntervals rebuilds the intervals of an interval set's elements:
// in key order (an end before a start at the same key), a start opens an
// interval that the next element closes; an end with nothing open (the
// "0 [end]" nft adds to a set it did not flush first) closes nothing.
func kernelIntervals(elems []rawElem) []string {
	es := slices.Clone(elems)
	slices.SortStableFunc(es, func(a, b rawElem) int {
		if c := bytes.Compare(a.key, b.key); c != 0 {
			return c
		}
		switch {
		case a.end == b.end:
			return 0
		case a.end:
			return -1
		}
		return 1
	})
	var ivs []interval
	var open []byte
	for _, e := range es {
		if open != nil {
			ivs = append(ivs, interval{start: open, end: e.key})
			open = nil
		}
		if !e.end {
			open = e.key
		}
	}
	if open != nil {
		ivs = append(ivs, interval{start: open})
	}
	return mergeIntervals(ivs)
}

// mergeIntervals merges overlapping and adjacent intervals and returns
// them as sorted "start-end" hex strings (end "" for the top).
func mergeIntervals(ivs []interval) []string {
	ivs = slices.DeleteFunc(slices.Clone(ivs), func(iv interval) bool { return iv.end != nil && bytes.Compare(iv.start, iv.end) >= 0 })
	slices.SortFunc(ivs, func(a, b interval) int { return bytes.Compare(a.start, b.start) })
	var merged []interval
	for _, iv := range ivs {
		if n := len(merged); n > 0 && (merged[n-1].end == nil || bytes.Compare(iv.start, merged[n-1].end) <= 0) {
			if last := &merged[n-1]; last.end != nil && (iv.end == nil || bytes.Compare(iv.end, last.end) > 0) {
				last.end = iv.end
			}
			continue
		}
		merged = append(merged, iv)
	}
	out := make([]string, 0, len(merged))
	for _, iv := range merged {
		out = append(out, string(iv.start)+"-"+string(iv.end))
	}
	return out
}

// elemLabel spells a comparable element of s for a report: its key
// bytes (and an endpoint's data) in hex, a verdict as nft text, an
// interval as "start-end" in hex.
func elemLabel(s *Set, e string) string {
	n := keyLen(s)
	switch {
	case n <= 0 || n > len(e):
		return hex.EncodeToString([]byte(e))
	case isInterval(s) && !s.Map:
		return hex.EncodeToString([]byte(e[:n])) + "-" + hex.EncodeToString([]byte(e[n+1:]))
	case strings.HasSuffix(s.Type, " : verdict"):
		return hex.EncodeToString([]byte(e[:n])) + " : " + e[n+1:]
	case s.Map:
		return hex.EncodeToString([]byte(e[:n])) + " : " + hex.EncodeToString([]byte(e[n+1:]))
	}
	return hex.EncodeToString([]byte(e))
}

// keyLen is the length of s's keys in bytes: 4 for an endpoint map's
// slot, else the sum of its key types' (each padded to 4); 0 unknown.
func keyLen(s *Set) int {
	if isEndpointMap(s) || isMaglevMap(s) {
		return 4
	}
	typ, _ := strings.CutSuffix(s.Type, " : verdict")
	n := 0
	for _, t := range strings.Split(typ, " . ") {
		switch t {
		case "ipv4_addr", "inet_proto", "inet_service":
			n += 4
		case "ipv6_addr":
			n += 16
		default:
			return 0
		}
	}
	return n
}
