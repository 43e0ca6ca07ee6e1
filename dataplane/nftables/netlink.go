package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
)

// NetlinkDialer opens a google/nftables connection whose socket is in the
// node's network namespace (for example gnft.New(opts...) run on a
// thread that entered it, or with gnft.WithNetNSFd(fd)), with the
// Dataplane's options (a lasting connection, socket buffers sized for
// the batch) applied. The Dataplane calls it once per netlink transaction
// (and once to list the table before a first sync) and closes the
// connection (CloseLasting) in the background after it.
type NetlinkDialer func(opts ...gnft.ConnOption) (*gnft.Conn, error)

// errNoNetlink marks an operation the netlink translator does not
// support; the sync then runs through nft instead.
var errNoNetlink = errors.New("not supported over netlink")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errNoNetlink, fmt.Sprintf(format, args...))
}

// nlBatch is a partial transaction translated for google/nftables: one
// closure per operation, queued on a Conn in order and committed by
// Conn.Flush as one atomic batch, as nft -f would.
type nlBatch struct {
	table *gnft.Table
	queue []*nlStep
}

// nlStep is one queued operation: a call, or elements to add to or
// delete from one set. Consecutive element steps on the same set and verb
// are merged into one message: the kernel finds a set by walking the
// table's list of sets, so one lookup per message instead of per element
// matters with thousands of endpoint maps.
type nlStep struct {
	fn    func(*gnft.Conn) error
	set   *gnft.Set
	add   bool
	elems []gnft.SetElement
}

func call(fn func(*gnft.Conn) error) *nlStep { return &nlStep{fn: fn} }

func elemStep(set *gnft.Set, add bool, elems ...gnft.SetElement) *nlStep {
	return &nlStep{set: set, add: add, elems: elems}
}

// maxElemsPerMessage bounds the elements merged into one message: they
// travel in one nested attribute, whose length is 16 bits, so a list
// past 64 KiB wraps and the kernel reads garbage (measured: a first load
// of 1,000 services, 5,000 hairpin pairs in one message, failed with
// ENOENT). 500 elements of the widest kind here (an endpoint map's range
// and address . port, ~80 bytes encoded) stay near 40 KiB.
const maxElemsPerMessage = 500

func (b *nlBatch) push(s *nlStep) {
	if n := len(b.queue); n > 0 && s.fn == nil {
		if last := b.queue[n-1]; last.fn == nil && last.set.Name == s.set.Name && last.add == s.add &&
			len(last.elems)+len(s.elems) <= maxElemsPerMessage {
			last.elems = append(last.elems, s.elems...)
			return
		}
	}
	b.queue = append(b.queue, s)
}

func (b *nlBatch) run(c *gnft.Conn) error {
	for _, q := range b.queue {
		var err error
		switch {
		case q.fn != nil:
			err = q.fn(c)
		case q.add:
			err = c.SetAddElements(q.set, q.elems)
		default:
			err = c.SetDeleteElements(q.set, q.elems)
		}
		if err != nil {
			return err
		}
	}
	return c.Flush()
}

// translate turns the recorded operations of a partial transaction into
// netlink messages that create, in the kernel, exactly what nft 1.0.6
// creates for the same text. Only the shapes the renderer emits for
// per-service objects are known (rule forms, rule.go); anything else returns
// an error wrapping errNoNetlink and nothing is sent. sets holds the
// definitions of every set and map the operations may name.
func translate(ops []op, fam dataplane.Family, table string, sets func(string) *Set) (*nlBatch, error) {
	t := &gnft.Table{Name: table, Family: gnft.TableFamilyIPv4}
	if fam == dataplane.IPv6 {
		t.Family = gnft.TableFamilyIPv6
	}
	b := &nlBatch{table: t}
	for _, o := range ops {
		q, err := translateOp(o, fam, t, sets)
		if err != nil {
			return nil, err
		}
		b.push(q)
	}
	return b, nil
}

func translateOp(o op, fam dataplane.Family, t *gnft.Table, sets func(string) *Set) (*nlStep, error) {
	switch obj := o.obj.(type) {
	case *knftables.Chain:
		if obj.Type != nil || obj.Hook != nil || obj.Priority != nil || obj.Comment != nil || obj.Handle != nil {
			return nil, unsupported("base chain or chain attributes (%s)", obj.Name)
		}
		ch := &gnft.Chain{Name: obj.Name, Table: t}
		switch o.verb {
		case "add":
			return call(func(c *gnft.Conn) error { c.AddChain(ch); return nil }), nil
		case "flush":
			return call(func(c *gnft.Conn) error { c.FlushChain(ch); return nil }), nil
		case "delete":
			return call(func(c *gnft.Conn) error { c.DelChain(ch); return nil }), nil
		}
	case *knftables.Rule:
		if o.verb != "add" || obj.Comment != nil || obj.Index != nil || obj.Handle != nil {
			return nil, unsupported("rule operation %s in %s", o.verb, obj.Chain)
		}
		if o.rule == nil {
			return nil, unsupported("rule without a form in %s", obj.Chain)
		}
		exprs, ok := o.rule.exprs()
		if !ok {
			return nil, unsupported("rule %q", obj.Rule)
		}
		r := &gnft.Rule{Table: t, Chain: &gnft.Chain{Name: obj.Chain, Table: t}, Exprs: exprs}
		return call(func(c *gnft.Conn) error { c.AddRule(r); return nil }), nil
	case *knftables.Element:
		return translateElement(o.verb, obj, fam, t, sets)
	case *knftables.Set:
		return translateAffinitySet(o.verb, obj, fam, t, sets)
	}
	return nil, unsupported("%s %T", o.verb, o.obj)
}

// translateElement handles elements of the verdict maps keyed by
// address . proto . port or proto . port, of the endpoint maps and of the
// hairpin set.
func translateElement(verb string, e *knftables.Element, fam dataplane.Family, t *gnft.Table, sets func(string) *Set) (*nlStep, error) {
	if e.Set != "" && e.Map == "" && e.Comment == nil {
		return translateSetElement(verb, e, fam, t, sets(e.Set))
	}
	s := sets(e.Map)
	if e.Map == "" || s == nil || !s.Map || e.Comment != nil {
		return nil, unsupported("element of set %q", e.Set+e.Map)
	}
	if isEndpointMap(s) {
		return translateEndpointElement(verb, e, fam, t, s)
	}
	if isMaglevMap(s) {
		return translateMaglevElement(verb, e, fam, t, s)
	}
	kind, _, ok := strings.Cut(s.Type, " : ")
	if !ok || !strings.HasSuffix(s.Type, " : verdict") {
		return nil, unsupported("map %s of type %s", s.Name, s.Type)
	}
	key, err := concatKey(fam, strings.Split(kind, " . "), e.Key)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", s.Name, err)
	}
	el := gnft.SetElement{Key: key}
	set := &gnft.Set{Name: s.Name, Table: t, IsMap: true}
	switch verb {
	case "add":
		if len(e.Value) != 1 {
			return nil, unsupported("element value %q", e.Value)
		}
		v, err := verdict(strings.Fields(e.Value[0]))
		if err != nil {
			return nil, err
		}
		el.VerdictData = v
		return elemStep(set, true, el), nil
	case "delete":
		return elemStep(set, false, el), nil
	}
	return nil, unsupported("%s element", verb)
}

// concatKey encodes a concatenated key as nft does: each part in network
// byte order, padded to a multiple of 4 bytes.
func concatKey(fam dataplane.Family, types, parts []string) ([]byte, error) {
	if len(types) < 2 || len(types) != len(parts) {
		return nil, unsupported("key %q of type %q", parts, types)
	}
	var out []byte
	for i, typ := range types {
		var v []byte
		switch typ {
		case addrType(fam):
			a, err := familyAddr(fam, parts[i])
			if err != nil {
				return nil, err
			}
			v = a.AsSlice()
		case "inet_proto":
			p, ok := protoNumber[parts[i]]
			if !ok {
				return nil, unsupported("protocol %q", parts[i])
			}
			v = []byte{p}
		case "inet_service":
			p, err := strconv.ParseUint(parts[i], 10, 16)
			if err != nil {
				return nil, unsupported("port %q", parts[i])
			}
			v = binary.BigEndian.AppendUint16(nil, uint16(p))
		default:
			return nil, unsupported("key type %s", typ)
		}
		for len(v)%4 != 0 {
			v = append(v, 0)
		}
		out = append(out, v...)
	}
	return out, nil
}

var protoNumber = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "sctp": unix.IPPROTO_SCTP}

// familyAddr parses a plain address (no prefix) of family fam, in the
// form the renderer writes it.
func familyAddr(fam dataplane.Family, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || !fam.Has(a) || a.Is4In6() || a.String() != s {
		return netip.Addr{}, unsupported("address %q", s)
	}
	return a, nil
}

// verdict parses "goto C", "jump C", "drop", "return".
func verdict(tok []string) (*expr.Verdict, error) {
	switch {
	case len(tok) == 2 && tok[0] == "goto" && validName(tok[1]):
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: tok[1]}, nil
	case len(tok) == 2 && tok[0] == "jump" && validName(tok[1]):
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: tok[1]}, nil
	case len(tok) == 1 && tok[0] == "drop":
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case len(tok) == 1 && tok[0] == "return":
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	}
	return nil, unsupported("verdict %q", strings.Join(tok, " "))
}

// validName accepts the chain and set names the renderer writes: no
// quoting, no spaces, no braces.
func validName(n string) bool {
	return n != "" && len(n) < 256 && !strings.ContainsAny(n, " \t\"'{}@;$,") && !strings.HasPrefix(n, "@")
}

// batchBuffer is the socket buffer size a netlink transaction is sent
// with. google/nftables sends a whole batch in one sendmsg, which the
// kernel refuses when it exceeds the socket's send buffer (212 KiB by
// default: "message too long" for a batch adding ~1,000 services), and
// every message's acknowledgement must fit in its receive buffer. nft
// sizes both for its batches the same way (SO_SNDBUFFORCE /
// SO_RCVBUFFORCE); the size is a limit, memory is charged only for what
// is queued.
const batchBuffer = 64 << 20

// bigBuffers raises the socket's buffers to batchBuffer: forced (the
// agent has CAP_NET_ADMIN), else as far as the system's maximum allows.
func bigBuffers(c *netlink.Conn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for _, opt := range [][2]int{{unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}, {unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[0], batchBuffer) != nil {
				serr = errors.Join(serr, unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[1], batchBuffer))
			}
		}
	}); err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("netlink socket buffers: %w", serr)
	}
	return nil
}

// closeLater closes a lasting connection in the background. Closing a
// netlink socket waits for an RCU grace period in the kernel (8–10 ms
// here, measured with strace: close() of the socket), which is most of a
// one-endpoint sync's wall time; the transaction has committed by then
// and nothing waits for the socket to go.
func closeLater(c *gnft.Conn) {
	go func() { _ = c.CloseLasting() }()
}

// DialOwnNamespace is the NetlinkDialer of an agent running in the node's
// namespace: a connection per partial sync, in the process's namespace.
func DialOwnNamespace(opts ...gnft.ConnOption) (*gnft.Conn, error) { return gnft.New(opts...) }
