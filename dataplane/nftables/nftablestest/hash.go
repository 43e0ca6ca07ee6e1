package nftablestest

import (
	"fmt"
	"strconv"

	"github.com/switchyard-proxy/switchyard/dataplane/maglev"
)

// jhash reads "jhash IP saddr [. PROTO sport] mod N seed S offset O" at
// i. With the client known (its address, and its port when the key has
// one) the draw is the one value the kernel computes, maglev.JHashMod of
// the same bytes; a packet without a source port and a key with one is
// every value alike, so each slot of the map gets 1/N.
func (r *ruleRun) jhash(i int, f flow) (numgen, int, error) {
	i, err := r.expect(i, "jhash")
	if err != nil {
		return numgen{}, i, err
	}
	ip := r.tok(i)
	if i, err = r.expect(i+1, "saddr"); err != nil {
		return numgen{}, i, err
	}
	if ip != "ip" && ip != "ip6" {
		return numgen{}, i, fmt.Errorf("jhash of %q saddr", ip)
	}
	withPort := r.tok(i) == "."
	if withPort {
		if r.tok(i+1) != f.proto {
			return numgen{}, i, fmt.Errorf("jhash of %s sport for a %s packet", r.tok(i+1), f.proto)
		}
		if i, err = r.expect(i+2, "sport"); err != nil {
			return numgen{}, i, err
		}
	}
	var mod, seed, offset uint64
	for _, field := range []struct {
		word string
		v    *uint64
	}{{"mod", &mod}, {"seed", &seed}, {"offset", &offset}} {
		if i, err = r.expect(i, field.word); err != nil {
			return numgen{}, i, err
		}
		if *field.v, err = strconv.ParseUint(r.tok(i), 0, 32); err != nil {
			return numgen{}, i, fmt.Errorf("jhash %s %q", field.word, r.tok(i))
		}
		i++
	}
	if mod == 0 {
		return numgen{}, i, fmt.Errorf("jhash mod 0")
	}
	if withPort && f.sport == 0 {
		return numgen{mod: mod, offset: offset}, i, nil
	}
	key := maglev.AddrKey(f.src)
	if withPort {
		key = maglev.FlowKey(f.src, f.sport)
	}
	slot := maglev.JHashMod(key, uint32(seed), uint32(mod))
	return numgen{mod: 1, offset: offset + uint64(slot)}, i, nil
}
