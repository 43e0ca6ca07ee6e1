package ruleread

import (
	"bytes"
	"fmt"
	"iter"
	"net/netip"
	"strconv"
	"strings"
)

// IptablesServiceChain finds, in iptables-save output of the nat table,
// the KUBE-SVC- (or KUBE-SVL-) chain that vip's rule jumps or goes to: in
// KUBE-SERVICES for kube-proxy, in one of its KUBE-SHARD- chains for
// Switchyard. The rule must name vip as its destination (-d vip/32) and
// its port as a whole word (--dport 80 is not --dport 8080), and the
// first such rule that sends to a service chain counts: the service
// chain's own masquerade rule names the same address and port and jumps
// elsewhere.
func IptablesServiceChain(save []byte, vip netip.AddrPort) (string, error) {
	dst := []byte("-d " + vip.Addr().String() + "/32 ")
	port := []byte("--dport " + strconv.Itoa(int(vip.Port())))
	for line := range bytes.Lines(save) {
		// As bufio.ScanLines cuts them: a CR before the newline is not
		// part of the line, so a port at the end of one still ends a word.
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if !bytes.HasPrefix(line, []byte("-A ")) || !bytes.Contains(line, dst) || !hasWord(line, port) {
			continue
		}
		f := bytes.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			verb, target := string(f[i]), f[i+1]
			if (verb == "-j" || verb == "-g") &&
				(bytes.HasPrefix(target, []byte("KUBE-SVC-")) || bytes.HasPrefix(target, []byte("KUBE-SVL-"))) {
				return string(target), nil
			}
		}
	}
	return "", fmt.Errorf("no nat rule sends %s to a KUBE-SVC chain (not programmed yet, or written by another iptables flavour)", vip)
}

// hasWord reports whether s holds w followed by a space or the end:
// "--dport 80" must not match "--dport 8080".
func hasWord(s, w []byte) bool {
	for rest := s; ; {
		i := bytes.Index(rest, w)
		if i < 0 {
			return false
		}
		end := i + len(w)
		if end == len(rest) || rest[end] == ' ' {
			return true
		}
		rest = rest[end:]
	}
}

// NftServiceChain finds, in an nft listing that holds the service-ips map
// (`nft list map ip <table> service-ips`, or the whole table), the chain
// the element for vip (TCP) goes or jumps to. An element must begin with
// vip: a longer address ending in the same digits (110.96.1.1 for
// 10.96.1.1) is another Service's.
func NftServiceChain(listing []byte, vip netip.AddrPort) (string, error) {
	addr := []byte(vip.Addr().String())
	key := string(addr) + " . tcp . " + strconv.Itoa(int(vip.Port())) + " :"
	for raw := range elements(listing) {
		// A whole table's listing holds every map's elements, tens of
		// thousands at 10,000 Services; only one naming the address can
		// be vip's, so the others are not worth normalizing.
		if !bytes.Contains(raw, addr) {
			continue
		}
		rest, ok := strings.CutPrefix(normalize(raw), key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 2 && (f[0] == "goto" || f[0] == "jump") {
			// nft may print the name quoted; the chain is named without
			// the quotes.
			return strings.Trim(f[1], `"`), nil
		}
	}
	return "", fmt.Errorf("no element of service-ips sends %s anywhere (not programmed yet)", vip)
}

// Elements returns the elements of every `elements = { … }` block in an
// nft listing, each with its white space folded to single spaces (nft
// wraps a long block between elements and indents the continuation), in
// order.
func Elements(listing []byte) []string {
	var out []string
	for raw := range elements(listing) {
		if el := normalize(raw); el != "" {
			out = append(out, el)
		}
	}
	return out
}

// elements yields the raw text of each element of every elements block,
// without copying the listing: NftServiceChain stops at the first match.
func elements(listing []byte) iter.Seq[[]byte] {
	open := []byte("elements = {")
	return func(yield func([]byte) bool) {
		for s := listing; ; {
			i := bytes.Index(s, open)
			if i < 0 {
				return
			}
			s = s[i+len(open):]
			j := bytes.IndexByte(s, '}')
			if j < 0 {
				j = len(s)
			}
			for el := range bytes.SplitSeq(s[:j], []byte(",")) {
				if !yield(el) {
					return
				}
			}
			s = s[j:]
		}
	}
}

func normalize(raw []byte) string { return strings.Join(strings.Fields(string(raw)), " ") }
