package nftables

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// fakeKernel stands in for the kernel in drift tests: a generation that
// every transaction committed through the bed and every foreign change
// (foreign) bumps, and a tableReader that reads the bed's knftables
// Fakes into the kernel's form, with the encoders the netlink path
// uses, so the check's comparison runs as on the real kernel.
type fakeKernel struct {
	fakes map[dataplane.Family]*knftables.Fake

	mu    sync.Mutex
	gen   uint32
	reads int
}

// newDriftBed is a fakeBed whose Dataplane checks drift on fakeKernel.
func newDriftBed(t testing.TB, fams ...dataplane.Family) (*fakeBed, *fakeKernel) {
	t.Helper()
	b := newFakeBed(t, fams...)
	k := &fakeKernel{fakes: b.fakes, gen: 100}
	for _, r := range b.rec {
		r.onCommit = k.commit
	}
	b.dp.genRead, b.dp.reader = k.generation, k
	return b, k
}

func (k *fakeKernel) commit() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
}

func (k *fakeKernel) generation(context.Context) (uint32, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen, nil
}

// readBacks returns how many tables were read back so far.
func (k *fakeKernel) readBacks() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.reads
}

// foreign runs a transaction on a family's table as another writer
// would (nft from a shell): the Dataplane does not see it run.
func (k *fakeKernel) foreign(t testing.TB, fam dataplane.Family, build func(tx *knftables.Transaction)) {
	t.Helper()
	f := k.fakes[fam]
	tx := f.NewTransaction()
	build(tx)
	if err := f.Run(t.Context(), tx); err != nil {
		t.Fatalf("foreign change: %v", err)
	}
	k.commit()
}

func (k *fakeKernel) readTable(fam dataplane.Family) (*kernelTable, error) {
	k.mu.Lock()
	k.reads++
	k.mu.Unlock()
	f := k.fakes[fam]
	f.RLock()
	defer f.RUnlock()
	if f.Table == nil {
		return nil, nil
	}
	kt := &kernelTable{chains: map[string]*kernelChain{}, sets: map[string]*kernelSet{}, flowtables: map[string][]string{}}
	for n, ft := range f.Table.Flowtables {
		kt.flowtables[n] = ft.Devices
	}
	for n, c := range f.Table.Chains {
		kc := &kernelChain{}
		if c.Hook != nil {
			kc.base = baseString(*c.Type, *c.Hook, *c.Priority)
		}
		for _, r := range c.Rules {
			kc.rules = append(kc.rules, kernelRule{exprs: fakeExprs(fam, r.Rule)})
		}
		kt.chains[n] = kc
	}
	for n, s := range f.Table.Sets {
		def := &Set{Name: n, Type: s.Type, TypeOf: s.TypeOf, Flags: s.Flags, Dynamic: slices.Contains(s.Flags, knftables.DynamicFlag)}
		kt.sets[n] = fakeSet(fam, def, s.Elements)
	}
	for n, m := range f.Table.Maps {
		def := &Set{Name: n, Map: true, Type: m.Type, TypeOf: m.TypeOf, Flags: m.Flags}
		kt.sets[n] = fakeSet(fam, def, m.Elements)
	}
	return kt, nil
}

// fakeExprs is what the kernel would hold for a rule: parseRule's
// expressions, or, for a rule outside its grammar, the sets and chains
// it names (all that the check compares of such a rule).
func fakeExprs(fam dataplane.Family, rule string) []any {
	var out []any
	if ex, err := parseRule(fam, rule); err == nil {
		for _, e := range ex {
			out = append(out, e)
		}
		return out
	}
	out = append(out, &opaqueExpr{Name: "fake"})
	for _, s := range setRefs(rule) {
		out = append(out, &expr.Lookup{SetName: s})
	}
	for _, c := range chainRefs(rule) {
		out = append(out, &expr.Verdict{Kind: expr.VerdictJump, Chain: c})
	}
	return out
}

// fakeSet encodes a set's elements as nft sends them: an interval as a
// start element (with the data) and an end element one past it.
func fakeSet(fam dataplane.Family, s *Set, elems []*knftables.Element) *kernelSet {
	ks := &kernelSet{isMap: s.Map, interval: isInterval(s), dynamic: s.Dynamic}
	for _, e := range elems {
		key, value := strings.Join(e.Key, " . "), strings.Join(e.Value, " ")
		ks.elems = append(ks.elems, fakeElems(fam, s, key, value)...)
	}
	return ks
}

func fakeElems(fam dataplane.Family, s *Set, key, value string) []rawElem {
	must := func(b []byte, err error) []byte {
		if err != nil {
			panic(err) // test data: every element the renderer writes encodes
		}
		return b
	}
	switch {
	case isEndpointMap(s):
		lo, hi, err := slotRange(key)
		if err != nil {
			panic(err)
		}
		return []rawElem{
			{key: binary.BigEndian.AppendUint32(nil, lo), val: must(addrPortData(fam, value))},
			{key: binary.BigEndian.AppendUint32(nil, hi+1), end: true},
		}
	case isMaglevMap(s):
		slot, err := maglevSlot(key)
		if err != nil {
			panic(err)
		}
		return []rawElem{{key: maglevKey(slot), val: must(addrPortData(fam, value))}}
	case isInterval(s):
		iv, err := prefixInterval(fam, key)
		if err != nil {
			panic(err)
		}
		out := []rawElem{{key: iv.start}}
		if iv.end != nil {
			out = append(out, rawElem{key: iv.end, end: true})
		}
		return out
	}
	typ, verdictMap := strings.CutSuffix(s.Type, " : verdict")
	e := rawElem{key: must(encodeKey(fam, typ, key))}
	if verdictMap {
		e.val = must(encodeVerdict(value))
	}
	return []rawElem{e}
}

// encodeVerdict is decodeVerdict's inverse: the NFTA_VERDICT_*
// attributes of "goto C", "drop", ….
func encodeVerdict(text string) ([]byte, error) {
	tok := strings.Fields(text)
	ae := netlink.NewAttributeEncoder()
	ae.ByteOrder = binary.BigEndian
	for c, n := range verdictCodes {
		if len(tok) > 0 && tok[0] == n {
			ae.Uint32(unix.NFTA_VERDICT_CODE, uint32(c))
			if len(tok) == 2 {
				ae.String(unix.NFTA_VERDICT_CHAIN, tok[1])
			}
			return ae.Encode()
		}
	}
	return nil, unsupported("verdict %q", text)
}
