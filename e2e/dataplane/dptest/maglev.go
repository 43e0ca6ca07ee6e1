package dptest

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// KernelMaglev is a maglev service port as an nftables node programmed
// it, read back with nft: the rule's modulus and seed, and the endpoint
// ("address:port") of each slot.
type KernelMaglev struct {
	Map   string
	Seed  uint32
	Slots []string
}

var (
	maglevRule  = regexp.MustCompile(`jhash ip saddr \. (?:tcp|udp|sctp) sport mod (\d+) seed (0x[0-9a-f]+) offset (\d+) map @(maglev-[a-z]+-\d+)`)
	maglevElems = regexp.MustCompile(`(\d+) : ([0-9.]+) \. (\d+)`)
)

// ReadKernelMaglev reads the IPv4 maglev table of the chain whose name
// contains chain (a service port's "namespace/name/proto/port") from a
// node's "switchyard" table: exec runs nft in the node's namespace.
// Slot i is the element at the rule's offset + i; a slot with no element
// is "".
func ReadKernelMaglev(ctx context.Context, exec func(ctx context.Context, argv ...string) ([]byte, error), chain string) (KernelMaglev, error) {
	var km KernelMaglev
	out, err := exec(ctx, "nft", "list", "table", "ip", "switchyard")
	if err != nil {
		return km, err
	}
	text := string(out)
	at := strings.Index(text, chain+" {")
	if at < 0 {
		return km, fmt.Errorf("no chain %s in the table", chain)
	}
	end := strings.Index(text[at:], "\n\t}")
	m := maglevRule.FindStringSubmatch(text[at : at+max(end, 0)])
	if m == nil {
		return km, fmt.Errorf("chain %s has no maglev rule:\n%s", chain, text[at:at+max(end, 0)])
	}
	size, _ := strconv.Atoi(m[1])
	seed, _ := strconv.ParseUint(m[2], 0, 32)
	offset, _ := strconv.ParseUint(m[3], 10, 32)
	km.Map, km.Seed, km.Slots = m[4], uint32(seed), make([]string, size)
	list, err := exec(ctx, "nft", "list", "map", "ip", "switchyard", km.Map)
	if err != nil {
		return km, err
	}
	for _, e := range maglevElems.FindAllStringSubmatch(string(list), -1) {
		k, _ := strconv.ParseUint(e[1], 10, 32)
		if k >= offset && k < offset+uint64(size) {
			km.Slots[k-offset] = e[2] + ":" + e[3]
		}
	}
	return km, nil
}
