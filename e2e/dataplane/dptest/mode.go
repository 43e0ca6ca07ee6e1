package dptest

import (
	"context"
	"os"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
)

// Main is a kernel mode package's TestMain: a process the bed started as
// an echo server (echo.RunChild) serves and exits; otherwise the tests
// run.
func Main(m *testing.M) {
	if code, ok := echo.RunChild(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// Dataplane is what a bed needs of a mode's Dataplane to program it.
type Dataplane interface {
	Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error
}

// MustApply programs st with dp (a partial sync), failing the test on
// error: a mode's Apply.
func MustApply(t *testing.T, dp Dataplane, st *dataplane.State) {
	t.Helper()
	if err := dp.Apply(t.Context(), st, dataplane.ApplyOptions{}); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// ApplyWith is the Apply of dp (MustApply).
func ApplyWith(dp Dataplane) Apply {
	return func(t *testing.T, st *dataplane.State) {
		t.Helper()
		MustApply(t, dp, st)
	}
}

// NodeFamilies are the families a mode programs on the bed: IPv4 only,
// or IPv4 and IPv6 on a dual-stack bed.
func (b *Bed) NodeFamilies() []dataplane.Family {
	if b.DualStack() {
		return []dataplane.Family{dataplane.IPv4, dataplane.IPv6}
	}
	return []dataplane.Family{dataplane.IPv4}
}

// Conntrack is the conntrack cleaner of a mode's Dataplane on the bed:
// with cleanup one that deletes stale UDP entries through netlink in the
// node namespace, as the agent does (see ModeBed); nil without.
func (b *Bed) Conntrack(t *testing.T, cleanup bool) conntrack.Cleaner {
	t.Helper()
	if !cleanup {
		return nil
	}
	return conntrack.Netlink{Handle: b.NetfilterHandle(t)}
}
