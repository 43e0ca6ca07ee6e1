package iptablestest

import (
	"fmt"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane/explain"
)

// MasqMark is the mark bit both the iptables and the ipvs modes set for
// POSTROUTING to masquerade.
const MasqMark = 0x4000

// Stack is the path of a connection's first packet through a node's
// netfilter hooks, as the tracers model it:
//
//   - from the node itself (a local source): nat OUTPUT, filter OUTPUT,
//     nat POSTROUTING, then filter INPUT when the destination is local
//     (the loopback delivery);
//   - from the network: nat PREROUTING, then filter INPUT when the
//     destination (after a DNAT) is local, else filter FORWARD and nat
//     POSTROUTING.
//
// Balance is a load balancer inside the kernel (IPVS): it sees the
// node's own packets at LOCAL_OUT, after nat OUTPUT and before filter
// OUTPUT, and the others at LOCAL_IN, after filter INPUT, as IPVS's
// hooks sit. A packet it forwards leaves through nat POSTROUTING.
type Stack struct {
	Walker *Walker
	// Balance, when set, takes a packet addressed to one of its virtual
	// servers: took is false for any other. It returns the branches the
	// packet splits into, forwarded to an endpoint or refused (Target
	// REJECT: a virtual server without a usable real server answers with
	// ICMP port unreachable).
	Balance func(b Branch) (out []Branch, took bool, err error)
}

// end is one branch at its end and what became of it.
type end struct {
	b      Branch
	action explain.Action
	masq   bool
	note   string
}

// Trace follows pkt through the stack and sums its branches up: the
// action they agree on, the endpoints with their shares, masquerade when
// every forwarded branch left with the masquerade mark and was
// masqueraded in POSTROUTING, affinity, and the path. Branches that end
// differently (some forwarded, some refused) are an error: no mode
// programs that.
func (s *Stack) Trace(pkt explain.Packet) (explain.Verdict, error) {
	if err := pkt.Validate(); err != nil {
		return explain.Verdict{}, err
	}
	pkt.Src, pkt.Dst = pkt.Src.Unmap(), pkt.Dst.Unmap()
	fromNode := s.Walker.Local(pkt.Src)
	natChain := "PREROUTING"
	if fromNode {
		natChain = "OUTPUT"
	}
	bs, err := s.Walker.Walk("nat", natChain, Branch{Pkt: pkt, Share: 1})
	if err != nil {
		return explain.Verdict{}, fmt.Errorf("%s: %w", pkt, err)
	}
	var ends []end
	for _, b := range bs {
		var e []end
		t := b.Target
		b.Target = "" // accepted by nat: on to filter
		switch {
		case t != "" && t != "ACCEPT" && t != "DNAT":
			err = fmt.Errorf("nat/%s ended in %s, which nat does not do", natChain, t)
		case fromNode:
			e, err = s.fromNode(b)
		default:
			e, err = s.fromNetwork(b)
		}
		if err != nil {
			return explain.Verdict{}, fmt.Errorf("%s: %w", pkt, err)
		}
		ends = append(ends, e...)
	}
	v, err := verdict(ends)
	if err != nil {
		return v, fmt.Errorf("%s: %w", pkt, err)
	}
	return v, nil
}

// fromNode follows a packet of the node's own after nat OUTPUT.
func (s *Stack) fromNode(b Branch) ([]end, error) {
	bs := []Branch{b}
	if s.Balance != nil && !b.Forwarded() {
		out, took, err := s.Balance(b)
		if err != nil {
			return nil, err
		}
		if took {
			bs = out
		}
	}
	var ends []end
	for _, b := range bs {
		chains := []string{"OUTPUT"}
		if s.Walker.Local(b.Pkt.Dst) {
			chains = append(chains, "INPUT")
		}
		e, err := s.leave(b, chains, true)
		if err != nil {
			return nil, err
		}
		ends = append(ends, e...)
	}
	return ends, nil
}

// fromNetwork follows a packet from the network after nat PREROUTING.
func (s *Stack) fromNetwork(b Branch) ([]end, error) {
	if !s.Walker.Local(b.Pkt.Dst) {
		return s.leave(b, []string{"FORWARD"}, true)
	}
	if s.Balance == nil || b.Forwarded() {
		// Delivered to the node (a DNAT to one of its addresses
		// included): POSTROUTING never sees it.
		return s.leave(b, []string{"INPUT"}, false)
	}
	in, err := s.filter([]string{"INPUT"}, b)
	if err != nil {
		return nil, err
	}
	var ends []end
	for _, b := range in {
		if b.Target != "" {
			ends = append(ends, refused(b))
			continue
		}
		out, took, err := s.Balance(b)
		if err != nil {
			return nil, err
		}
		if !took {
			ends = append(ends, end{b: b, action: explain.Pass})
			continue
		}
		for _, o := range out {
			e, err := s.leave(o, nil, true)
			if err != nil {
				return nil, err
			}
			ends = append(ends, e...)
		}
	}
	return ends, nil
}

// leave walks b through the filter chains, then a forwarded packet
// through nat POSTROUTING when its way goes there (post): its
// masquerade is decided there.
func (s *Stack) leave(b Branch, chains []string, post bool) ([]end, error) {
	if b.Target == "REJECT" || b.Target == "DROP" {
		return []end{refused(b)}, nil
	}
	bs, err := s.filter(chains, b)
	if err != nil {
		return nil, err
	}
	var ends []end
	for _, b := range bs {
		switch {
		case b.Target != "":
			ends = append(ends, refused(b))
		case !b.Forwarded():
			ends = append(ends, end{b: b, action: explain.Pass})
		case !post:
			ends = append(ends, end{b: b, action: explain.Forward})
		default:
			e, err := s.postrouting(b)
			if err != nil {
				return nil, err
			}
			ends = append(ends, e...)
		}
	}
	return ends, nil
}

// filter walks the filter chains in order; a branch a chain refuses
// keeps its Target (DROP or REJECT) and goes no further.
func (s *Stack) filter(chains []string, b Branch) ([]Branch, error) {
	bs := []Branch{b}
	for _, c := range chains {
		var next []Branch
		for _, b := range bs {
			if b.Target != "" {
				next = append(next, b)
				continue
			}
			out, err := s.Walker.Walk("filter", c, b)
			if err != nil {
				return nil, err
			}
			for i := range out {
				if out[i].Target == "ACCEPT" {
					out[i].Target = "" // accepted by this hook, on to the next
				}
			}
			next = append(next, out...)
		}
		bs = next
	}
	return bs, nil
}

// postrouting decides a forwarded branch's masquerade: marked before,
// and masqueraded in nat POSTROUTING. A MASQUERADE without the mark is
// the hairpin rule's, which explain does not report.
func (s *Stack) postrouting(b Branch) ([]end, error) {
	marked := b.Mark&MasqMark != 0
	out, err := s.Walker.Walk("nat", "POSTROUTING", b)
	if err != nil {
		return nil, err
	}
	ends := make([]end, 0, len(out))
	for _, o := range out {
		e := end{b: o, action: explain.Forward}
		switch masq := o.Target == "MASQUERADE"; {
		case masq && marked:
			e.masq = true
		case masq:
			e.note = "masqueraded in POSTROUTING without the mark (hairpin), not reported"
		case marked:
			e.note = "marked for masquerade, but POSTROUTING does not masquerade it"
		}
		ends = append(ends, e)
	}
	return ends, nil
}

func refused(b Branch) end {
	if b.Target == "DROP" {
		return end{b: b, action: explain.Drop}
	}
	return end{b: b, action: explain.Reject}
}

// verdict sums the ends up.
func verdict(ends []end) (explain.Verdict, error) {
	if len(ends) == 0 {
		return explain.Verdict{}, fmt.Errorf("no branch came out")
	}
	v := explain.Verdict{Action: ends[0].action}
	seenPath, seenNote := map[string]bool{}, map[string]bool{}
	var masq, plain int
	for _, e := range ends {
		if e.action != v.Action {
			return v, fmt.Errorf("branches end in %s and %s: %s", v.Action, e.action, describe(ends))
		}
		for _, p := range e.b.Path {
			if !seenPath[p] {
				seenPath[p] = true
				v.Path = append(v.Path, p)
			}
		}
		if e.note != "" && !seenNote[e.note] {
			seenNote[e.note] = true
			v.Notes = append(v.Notes, e.note)
		}
		if v.Action != explain.Forward {
			continue
		}
		v.Endpoints = append(v.Endpoints, explain.Share{Endpoint: e.b.Endpoint, Share: e.b.Share})
		v.AffinitySeconds = max(v.AffinitySeconds, e.b.Affinity)
		if e.masq {
			masq++
		} else {
			plain++
		}
	}
	v.Endpoints = explain.SortShares(v.Endpoints)
	v.Masquerade = v.Action == explain.Forward && plain == 0
	if masq > 0 && plain > 0 {
		v.Notes = append(v.Notes, fmt.Sprintf("masqueraded on %d of %d branches", masq, masq+plain))
	}
	return v, nil
}

func describe(ends []end) string {
	parts := make([]string, len(ends))
	for i, e := range ends {
		parts[i] = fmt.Sprintf("%s %.3f via %s", e.action, e.b.Share, strings.Join(e.b.Path, " > "))
	}
	return strings.Join(parts, "; ")
}
