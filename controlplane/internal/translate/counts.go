package translate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Recorder receives one call per skipped object, dropped part or clamped
// list. Implementations must be safe for concurrent use.
type Recorder interface {
	Record(kind Kind, reason Reason)
}

// Count is one counter of a Counts snapshot.
type Count struct {
	Kind   Kind
	Reason Reason
	N      uint64
}

type countKey struct {
	kind   Kind
	reason Reason
}

// Counts is a goroutine-safe Recorder that counts by (Kind, Reason). The
// zero value is ready to use; a nil *Counts records nothing.
type Counts struct {
	mu sync.Mutex
	n  map[countKey]uint64
}

var _ Recorder = (*Counts)(nil)

// NewCounts returns empty counts.
func NewCounts() *Counts { return &Counts{} }

// Record implements Recorder.
func (c *Counts) Record(kind Kind, reason Reason) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[countKey]uint64{}
	}
	c.n[countKey{kind, reason}]++
}

// Get returns the count of one (kind, reason).
func (c *Counts) Get(kind Kind, reason Reason) uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[countKey{kind, reason}]
}

// Total returns the sum of all counts.
func (c *Counts) Total() uint64 {
	var total uint64
	for _, n := range c.Snapshot() {
		total += n.N
	}
	return total
}

// Snapshot returns the non-zero counts sorted by kind, then reason.
func (c *Counts) Snapshot() []Count {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	out := make([]Count, 0, len(c.n))
	for k, n := range c.n {
		out = append(out, Count{Kind: k.kind, Reason: k.reason, N: n})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// String returns the snapshot as "Kind/Reason=N" items, space separated,
// in Snapshot order; "" when nothing was recorded.
func (c *Counts) String() string {
	snap := c.Snapshot()
	items := make([]string, len(snap))
	for i, n := range snap {
		items[i] = fmt.Sprintf("%s/%s=%d", n.Kind, n.Reason, n.N)
	}
	return strings.Join(items, " ")
}

// tally reports to a possibly nil Recorder on behalf of one object.
type tally struct {
	rec       Recorder
	kind      Kind
	namespace string
	name      string
}

func newTally(rec Recorder, kind Kind, namespace, name string) tally {
	return tally{rec: rec, kind: kind, namespace: namespace, name: name}
}

// apiObject is a pointer to an API object, as each translator takes one.
type apiObject[T any] interface {
	*T
	GetNamespace() string
	GetName() string
}

// objectTally returns the tally that reports on behalf of obj or, for a
// nil obj, the *SkipError that skips it: every translator's first step.
func objectTally[T any, P apiObject[T]](rec Recorder, kind Kind, obj P) (tally, error) {
	if obj == nil {
		return tally{}, newTally(rec, kind, "", "").skip(ReasonNilObject, "nil %s", kind)
	}
	return newTally(rec, kind, obj.GetNamespace(), obj.GetName()), nil
}

// clusterTally is objectTally for a cluster-scoped object, which has no
// namespace whatever its metadata says, and whose name must be a DNS-1123
// subdomain as the API server requires.
func clusterTally[T any, P apiObject[T]](rec Recorder, kind Kind, obj P) (tally, error) {
	t, err := objectTally(rec, kind, obj)
	if err != nil {
		return tally{}, err
	}
	t.namespace = ""
	if err := t.checkName(t.name); err != nil {
		return tally{}, err
	}
	return t, nil
}

// checkName skips the object unless name is a DNS-1123 subdomain, the rule
// for the names of Nodes, ServiceCIDRs and EndpointSlices.
func (t tally) checkName(name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return t.skip(ReasonInvalidName, "name: %s", strings.Join(msgs, "; "))
	}
	return nil
}

// drop records that part of the object was dropped, defaulted or clamped.
func (t tally) drop(reason Reason) {
	if t.rec != nil {
		t.rec.Record(t.kind, reason)
	}
}

// skip records that the whole object was skipped and returns the error
// that says so.
func (t tally) skip(reason Reason, format string, args ...any) error {
	t.drop(reason)
	return &SkipError{
		Kind:      t.kind,
		Namespace: t.namespace,
		Name:      t.name,
		Reason:    reason,
		Detail:    fmt.Sprintf(format, args...),
	}
}
