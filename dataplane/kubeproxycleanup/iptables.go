package kubeproxycleanup

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// sharedChains are kube-proxy's fixed chains whose names Switchyard's
// iptables mode uses too.
var sharedChains = []string{
	"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING",
	"KUBE-MARK-MASQ", "KUBE-FORWARD", "KUBE-PROXY-FIREWALL",
}

// sharedPrefixes are kube-proxy's per-service chain prefixes that
// Switchyard uses too.
var sharedPrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-SEP-", "KUBE-EXT-", "KUBE-FW-"}

// kubeProxyOnlyChains are chains kube-proxy (ipvs mode, or older iptables
// mode) creates and Switchyard never does: finding one is evidence.
var kubeProxyOnlyChains = []string{
	xtables.KubeProxyCanary, "KUBE-LOAD-BALANCER", "KUBE-NODE-PORT", "KUBE-SOURCE-RANGES-FIREWALL",
	"KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER",
}

// kubeProxyOnlyPrefixes: KUBE-XLB-* held local endpoints before 1.24.
var kubeProxyOnlyPrefixes = []string{"KUBE-XLB-"}

func isKubeProxyOnly(chain string) bool {
	return slices.Contains(kubeProxyOnlyChains, chain) || hasAnyPrefix(chain, kubeProxyOnlyPrefixes)
}

// isKubeProxyChain reports whether chain has one of kube-proxy's names.
// kubelet's KUBE-FIREWALL, KUBE-MARK-DROP, KUBE-KUBELET-CANARY and
// KUBE-IPTABLES-HINT are not among them.
func isKubeProxyChain(chain string) bool {
	return isKubeProxyOnly(chain) || isSharedChain(chain)
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// savedDump is one iptables-save output: tables in order, each with its
// chains in order, which of them are built in, and the rules by chain.
type savedDump struct {
	bin, save string // e.g. "iptables-nft", "iptables-nft-save"
	order     []string
	tables    map[string]*savedTable
}

type savedTable struct {
	chains  []string
	builtin map[string]bool
	rules   map[string][]string // chain → rule specs after "-A <chain> "
}

// parseSave reads iptables-save output. Lines it does not know are an
// error: acting on a dump it only half understood could delete the wrong
// rule.
func parseSave(out []byte) (*savedDump, error) {
	d := &savedDump{tables: map[string]*savedTable{}}
	var cur *savedTable
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name := line[1:]
			cur = &savedTable{builtin: map[string]bool{}, rules: map[string][]string{}}
			d.tables[name] = cur
			d.order = append(d.order, name)
		case cur == nil:
			return nil, fmt.Errorf("line %d: %q outside a table", n, line)
		case line == "COMMIT":
			cur = nil
		case strings.HasPrefix(line, ":"):
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, fmt.Errorf("line %d: bad chain line %q", n, line)
			}
			cur.chains = append(cur.chains, f[0])
			cur.builtin[f[0]] = f[1] != "-"
		case strings.HasPrefix(line, "-A "):
			chain, spec, _ := strings.Cut(line[len("-A "):], " ")
			cur.rules[chain] = append(cur.rules[chain], spec)
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n, line)
		}
	}
	return d, sc.Err()
}

// tablePlan is what to do in one table.
type tablePlan struct {
	flush   []string // every kube-proxy chain: emptied first
	dels    []string // "-D <chain> <spec>": jumps from built-in chains
	deletes []string // kube-proxy chains nothing foreign refers to
	kept    []string // kube-proxy chains a foreign chain still jumps to
}

// planTable decides, for one table, which kube-proxy chains to flush and
// delete and which jump rules to remove. A chain referenced from a
// foreign (neither built-in nor kube-proxy) chain is only flushed. With
// keepShared, the chains under the names Switchyard's iptables mode
// shares with kube-proxy are left alone (that mode has rewritten them
// already) and count as foreign: a kube-proxy-only chain they still jump
// to is only flushed. kube-proxy's jumps to them from built-in chains go
// all the same; that mode has its own beside them (xtables.IsOwnJump).
func planTable(t *savedTable, keepShared bool) tablePlan {
	var p tablePlan
	ours := func(ch string) bool {
		if keepShared && isSharedChain(ch) {
			return false
		}
		return isKubeProxyChain(ch)
	}
	referenced := map[string]bool{}
	for _, ch := range t.chains {
		if t.builtin[ch] || ours(ch) {
			continue
		}
		for _, r := range t.rules[ch] {
			referenced[xtables.RuleTarget(r)] = true
		}
	}
	for _, ch := range t.chains {
		switch {
		case t.builtin[ch]:
			for _, r := range t.rules[ch] {
				tgt := xtables.RuleTarget(r)
				if ours(tgt) || keepShared && isSharedChain(tgt) && !xtables.IsOwnJump(r) {
					p.dels = append(p.dels, "-D "+ch+" "+r)
				}
			}
		case !ours(ch):
		case referenced[ch]:
			p.flush = append(p.flush, ch)
			p.kept = append(p.kept, ch)
		default:
			p.flush = append(p.flush, ch)
			p.deletes = append(p.deletes, ch)
		}
	}
	return p
}

// isSharedChain reports the names Switchyard's iptables mode uses too.
func isSharedChain(ch string) bool {
	return slices.Contains(sharedChains, ch) || hasAnyPrefix(ch, sharedPrefixes)
}

// restorePayload is the iptables-restore --noflush input for d, or "" when
// d holds nothing of kube-proxy's. Per table: declaring a chain flushes it,
// so every kube-proxy chain is emptied before any is deleted and no
// reference between them remains; then the jumps from built-in chains go,
// then the chains. Each table commits atomically.
func restorePayload(d *savedDump, keepShared bool) (payload string, deleted, flushed []string) {
	var b strings.Builder
	for _, name := range d.order {
		p := planTable(d.tables[name], keepShared)
		if len(p.flush)+len(p.dels) == 0 {
			continue
		}
		xtables.WriteTableCleanup(&b, name, p.flush, p.dels, p.deletes)
		for _, ch := range p.deletes {
			deleted = append(deleted, d.bin+"/"+name+"/"+ch)
		}
		for _, ch := range p.kept {
			flushed = append(flushed, d.bin+"/"+name+"/"+ch)
		}
	}
	return b.String(), deleted, flushed
}

// cleanIPTables removes kube-proxy's chains from one back end and family.
func (c *cleaner) cleanIPTables(ctx context.Context, d *savedDump) (deleted, flushed []string, err error) {
	payload, deleted, flushed := restorePayload(d, slices.Contains(c.keepShared, d.bin))
	if payload == "" {
		return nil, nil, nil
	}
	// -w: iptables-legacy takes the xtables lock kubelet also takes; nft
	// ignores it.
	argv := []string{d.bin + "-restore", "-w", "--noflush"}
	if _, err := c.r.Run(ctx, argv, []byte(payload)); err != nil {
		return nil, nil, fmt.Errorf("remove kube-proxy chains with %s: %w", argv[0], err)
	}
	if len(flushed) > 0 {
		c.log.Info("kube-proxy chains kept empty: foreign rules jump to them", "chains", flushed)
	}
	return deleted, flushed, nil
}
