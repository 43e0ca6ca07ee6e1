package nftablestest

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// DefaultHairpinSet is the nftables mode's set of endpoint pairs that
// postrouting masquerades (a pod reaching itself through a Service).
const DefaultHairpinSet = "hairpin-endpoints"

// DefaultMasqMark is the mark bit the nftables mode's mark-for-masquerade
// chain sets.
const DefaultMasqMark = 0x4000

// maxDepth bounds jumps within one base chain: the kernel refuses loops
// and deeper stacks at load, so a deeper walk is a broken table.
const maxDepth = 32

// Tracer walks the default table of a knftables.Fake.
type Tracer struct {
	Fake *knftables.Fake
	// Local are the node's addresses: a packet from one of them leaves
	// through the output hook, and "fib ... type local" matches them.
	// Loopback addresses are always local.
	Local []netip.Addr
	// HairpinSet names the set whose lookup in postrouting marks hairpin
	// traffic; such a match is left out of Masquerade. Empty:
	// DefaultHairpinSet.
	HairpinSet string
	// MasqMark is the mark bit that asks postrouting to masquerade; 0:
	// DefaultMasqMark.
	MasqMark uint32
}

// Trace says what the Fake's rules do with the first packet of a
// connection.
func (t Tracer) Trace(pkt explain.Packet) (explain.Verdict, error) {
	if err := pkt.Validate(); err != nil {
		return explain.Verdict{}, fmt.Errorf("trace %s: %w", pkt, err)
	}
	if t.Fake == nil {
		return explain.Verdict{}, fmt.Errorf("trace %s: no Fake", pkt)
	}
	t.Fake.RLock()
	defer t.Fake.RUnlock()
	w, err := t.walker(pkt)
	if err != nil {
		return explain.Verdict{}, fmt.Errorf("trace %s: %w", pkt, err)
	}
	start := flow{src: pkt.Src.Unmap(), dst: pkt.Dst.Unmap(), proto: pkt.Protocol.String(), dport: pkt.Port, sport: pkt.SrcPort, weight: 1}
	var final []flow
	if w.isLocal(start.src) {
		final, err = w.fromNode(start)
	} else {
		final, err = w.fromNetwork(start)
	}
	if err != nil {
		return explain.Verdict{}, fmt.Errorf("trace %s: %w", pkt, err)
	}
	v, err := verdictOf(final)
	if err != nil {
		return v, fmt.Errorf("trace %s: %w", pkt, err)
	}
	return v, nil
}

// walker is one Trace over a locked Fake.
type walker struct {
	table    *knftables.FakeTable
	local    []netip.Addr
	hairpin  string
	masqMark uint32
	hooks    map[knftables.BaseChainHook][]baseChain
}

type baseChain struct {
	name   string
	typ    knftables.BaseChainType
	prio   int
	policy knftables.BaseChainPolicy
}

func (t Tracer) walker(pkt explain.Packet) (*walker, error) {
	if t.Fake.Table == nil {
		return nil, fmt.Errorf("the Fake has no table")
	}
	fam := t.family()
	switch {
	case fam == knftables.IPv4Family && pkt.IPv6():
		return nil, fmt.Errorf("an IPv6 packet never reaches an ip table")
	case fam == knftables.IPv6Family && !pkt.IPv6():
		return nil, fmt.Errorf("an IPv4 packet never reaches an ip6 table")
	case fam != knftables.IPv4Family && fam != knftables.IPv6Family && fam != knftables.InetFamily:
		return nil, fmt.Errorf("table family %q is not traced", fam)
	}
	w := &walker{table: t.Fake.Table, hairpin: cmp.Or(t.HairpinSet, DefaultHairpinSet),
		masqMark: cmp.Or(t.MasqMark, DefaultMasqMark), hooks: map[knftables.BaseChainHook][]baseChain{}}
	for _, a := range t.Local {
		w.local = append(w.local, a.Unmap())
	}
	for name, c := range w.table.Chains {
		if c.Hook == nil {
			continue
		}
		bc := baseChain{name: name, policy: knftables.AcceptPolicy}
		if c.Type != nil {
			bc.typ = *c.Type
		}
		if c.Policy != nil {
			bc.policy = *c.Policy
		}
		if c.Priority != nil {
			p, err := knftables.ParsePriority(fam, string(*c.Priority))
			if err != nil {
				return nil, fmt.Errorf("base chain %s: %w", name, err)
			}
			bc.prio = p
		}
		switch *c.Hook {
		case knftables.PreroutingHook, knftables.InputHook, knftables.ForwardHook, knftables.OutputHook, knftables.PostroutingHook:
		default:
			return nil, fmt.Errorf("base chain %s: hook %s is not traced", name, *c.Hook)
		}
		w.hooks[*c.Hook] = append(w.hooks[*c.Hook], bc)
	}
	for _, chains := range w.hooks {
		slices.SortFunc(chains, func(a, b baseChain) int { return cmp.Or(cmp.Compare(a.prio, b.prio), strings.Compare(a.name, b.name)) })
	}
	return w, nil
}

// family is the family of the Fake's default table: the Table object
// itself usually leaves it to the Fake's context.
func (t Tracer) family() knftables.Family {
	if t.Fake.Table.Family != "" {
		return t.Fake.Table.Family
	}
	for fam, tables := range t.Fake.Tables {
		for _, tb := range tables {
			if tb == t.Fake.Table {
				return fam
			}
		}
	}
	return ""
}

func (w *walker) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(w.local, a)
}

// flow is one branch of the packet: where it goes now and what happened
// to it. Branches split at numgen; weight is the branch's probability.
type flow struct {
	src, dst netip.Addr
	proto    string
	dport    uint16
	// sport is the client's port, 0 when the packet did not name one.
	sport  uint16
	weight float64

	dnat bool // dst and dport were rewritten
	mark uint32
	// marked: the masquerade mark was set when the DNAT happened;
	// masq: a masquerade statement ran.
	marked, masq bool
	affinity     time.Duration
	// dstNAT, srcNAT: conntrack has the connection's NAT binding for
	// that direction, so NAT chains of those hooks no longer run.
	dstNAT, srcNAT bool
	end            kind // drop or reject; none while the packet goes on
	path           []string
}

// fork is a copy of f with a share p of its weight and its own path.
func (f flow) fork(p float64) flow {
	g := f
	g.weight *= p
	g.path = slices.Clone(f.path)
	return g
}

// note appends to the path; clipped so forks never share an append.
func (f *flow) note(s string) { f.path = append(slices.Clip(f.path), s) }

// fromNetwork walks a packet that arrives on an interface.
func (w *walker) fromNetwork(f flow) ([]flow, error) {
	pre, done, err := w.hook(knftables.PreroutingHook, []flow{f})
	if err != nil {
		return nil, err
	}
	local, routed := w.route(pre)
	for i, f := range local {
		if f.dnat && f.marked {
			// A locally delivered packet meets no postrouting hook, so
			// the mark is never acted on; it is still reported.
			local[i].note("marked for masquerade, delivered locally: no postrouting")
		}
	}
	in, d, err := w.hook(knftables.InputHook, local)
	if err != nil {
		return nil, err
	}
	done = append(append(done, d...), in...)
	fwd, d, err := w.hook(knftables.ForwardHook, routed)
	if err != nil {
		return nil, err
	}
	done = append(done, d...)
	post, d, err := w.hook(knftables.PostroutingHook, fwd)
	if err != nil {
		return nil, err
	}
	return append(append(done, d...), post...), nil
}

// fromNode walks a packet the node sends: output, postrouting, and for a
// local destination the loopback delivery (prerouting, input).
func (w *walker) fromNode(f flow) ([]flow, error) {
	out, done, err := w.hook(knftables.OutputHook, []flow{f})
	if err != nil {
		return nil, err
	}
	post, d, err := w.hook(knftables.PostroutingHook, out)
	if err != nil {
		return nil, err
	}
	done = append(done, d...)
	local, routed := w.route(post)
	done = append(done, routed...)
	pre, d, err := w.hook(knftables.PreroutingHook, local)
	if err != nil {
		return nil, err
	}
	done = append(done, d...)
	in, d, err := w.hook(knftables.InputHook, pre)
	if err != nil {
		return nil, err
	}
	return append(append(done, d...), in...), nil
}

// route splits flows by the routing decision on their (translated)
// destination.
func (w *walker) route(flows []flow) (local, routed []flow) {
	for _, f := range flows {
		if w.isLocal(f.dst) {
			f.note("route: local")
			local = append(local, f)
		} else {
			routed = append(routed, f)
		}
	}
	return local, routed
}

// hook runs flows through the base chains of one hook, in priority
// order. It returns the flows that go on and those dropped or rejected.
func (w *walker) hook(h knftables.BaseChainHook, flows []flow) (pass, done []flow, err error) {
	active := flows
	for _, bc := range w.hooks[h] {
		var next []flow
		for _, f := range active {
			if bc.typ == knftables.NATType && w.natDecided(h, f) {
				next = append(next, f)
				continue
			}
			f.note(string(h) + "/" + bc.name)
			res, err := w.chain(bc.name, f, 0)
			if err != nil {
				return nil, nil, err
			}
			for _, r := range res {
				switch {
				case r.kind == kindDrop || r.kind == kindReject:
					r.f.end = r.kind
					done = append(done, r.f)
				case r.kind == kindReturn && bc.policy == knftables.DropPolicy:
					r.f.note(bc.name + ": policy drop")
					r.f.end = kindDrop
					done = append(done, r.f)
				default:
					next = append(next, r.f)
				}
			}
		}
		active = next
	}
	for i := range active {
		switch h {
		case knftables.PreroutingHook, knftables.OutputHook:
			active[i].dstNAT = true
		case knftables.PostroutingHook, knftables.InputHook:
			active[i].srcNAT = true
		}
	}
	return active, done, nil
}

// natDecided reports whether conntrack already holds the NAT binding a
// NAT chain of hook h would decide.
func (w *walker) natDecided(h knftables.BaseChainHook, f flow) bool {
	if h == knftables.PreroutingHook || h == knftables.OutputHook {
		return f.dstNAT
	}
	return f.srcNAT
}

// result is how a chain ended for one branch.
type result struct {
	f    flow
	kind kind
}

// chain runs f through a chain from its first rule. A branch that falls
// off the end or returns ends in kindReturn.
func (w *walker) chain(name string, f flow, depth int) ([]result, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("chain %s: more than %d nested jumps", name, maxDepth)
	}
	c := w.table.Chains[name]
	if c == nil {
		return nil, fmt.Errorf("jump to missing chain %s", name)
	}
	if depth > 0 {
		f.note(name)
	}
	active := []flow{f}
	var out []result
	for _, r := range c.Rules {
		var next []flow
		for _, fl := range active {
			brs, err := w.rule(r.Rule, fl)
			if err != nil {
				return nil, fmt.Errorf("chain %s, rule %q: %w", name, r.Rule, err)
			}
			for _, b := range brs {
				cont, ended, err := w.verdict(b, depth)
				if err != nil {
					return nil, err
				}
				next, out = append(next, cont...), append(out, ended...)
			}
		}
		if active = next; len(active) == 0 {
			break
		}
	}
	for _, fl := range active {
		out = append(out, result{fl, kindReturn})
	}
	return out, nil
}

// verdict applies a rule's verdict to its branch: the flows that go on
// with the chain's next rule, and the results that end the chain.
func (w *walker) verdict(b branch, depth int) (cont []flow, ended []result, err error) {
	switch b.v.kind {
	case kindNone:
		return []flow{b.f}, nil, nil
	case kindJump:
		sub, err := w.chain(b.v.chain, b.f, depth+1)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range sub {
			if r.kind == kindReturn {
				cont = append(cont, r.f)
			} else {
				ended = append(ended, r)
			}
		}
		return cont, ended, nil
	case kindGoto:
		// The goto target returns to this chain's caller.
		sub, err := w.chain(b.v.chain, b.f, depth+1)
		return nil, sub, err
	case kindDrop:
		b.f.note("drop")
		return nil, []result{{b.f, kindDrop}}, nil
	default:
		return nil, []result{{b.f, b.v.kind}}, nil
	}
}

// verdictOf sums the branches into one verdict.
func verdictOf(final []flow) (explain.Verdict, error) {
	byAction := map[explain.Action]float64{}
	var total float64
	for _, f := range final {
		byAction[actionOf(f)] += f.weight
		total += f.weight
	}
	if math.Abs(total-1) > 1e-9 {
		return explain.Verdict{}, fmt.Errorf("branches add up to %.6f, not 1 (tracer bug)", total)
	}
	v := explain.Verdict{Path: mergePaths(final)}
	if len(byAction) != 1 {
		parts := make([]string, 0, len(byAction))
		for a, wgt := range byAction {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", a, 100*wgt))
		}
		slices.Sort(parts)
		return v, fmt.Errorf("branches end differently: %s", strings.Join(parts, ", "))
	}
	for a := range byAction {
		v.Action = a
	}
	if v.Action != explain.Forward {
		return v, nil
	}
	for i, f := range final {
		if i > 0 && (masquerades(f) != masquerades(final[0]) || f.affinity != final[0].affinity) {
			return v, fmt.Errorf("branches differ: to %s masquerade %t affinity %s, to %s masquerade %t affinity %s",
				final[0].dst, masquerades(final[0]), final[0].affinity, f.dst, masquerades(f), f.affinity)
		}
		v.Endpoints = append(v.Endpoints, explain.Share{Endpoint: netip.AddrPortFrom(f.dst, f.dport), Share: f.weight})
	}
	v.Endpoints = explain.SortShares(v.Endpoints)
	v.Masquerade = masquerades(final[0])
	v.AffinitySeconds = uint32(final[0].affinity / time.Second)
	return v, nil
}

// masquerades: the packet was marked for masquerade when it was DNATed
// (the hairpin rule, which marks after DNAT, never counts), or another
// rule masqueraded it.
func masquerades(f flow) bool { return f.marked || f.masq }

func actionOf(f flow) explain.Action {
	switch {
	case f.end == kindDrop:
		return explain.Drop
	case f.end == kindReject:
		return explain.Reject
	case f.dnat:
		return explain.Forward
	}
	return explain.Pass
}

// mergePaths is every branch's path, each step once (a chain a branch
// walks twice, as a looped-back packet does, is two steps): a step only
// some branches took goes before the next step they share with the
// others, so an endpoint's DNAT stays next to its siblings'.
func mergePaths(final []flow) []string {
	type step struct {
		s string
		n int // earlier occurrences in the branch
	}
	var out []step
	for _, f := range final {
		seen := map[string]int{}
		path := make([]step, len(f.path))
		for k, s := range f.path {
			path[k] = step{s, seen[s]}
			seen[s]++
		}
		for k, st := range path {
			if slices.Contains(out, st) {
				continue
			}
			at := len(out)
			for _, later := range path[k+1:] {
				if i := slices.Index(out, later); i >= 0 {
					at = i
					break
				}
			}
			out = slices.Insert(out, at, st)
		}
	}
	strs := make([]string, len(out))
	for i, st := range out {
		strs[i] = st.s
	}
	return strs
}
