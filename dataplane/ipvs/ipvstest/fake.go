package ipvstest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset/ipsettest"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
)

// Fake is an in-memory kernel for the ipvs mode: it implements ipvs.Kernel
// and, for ipset and iptables commands, command.Runner.
type Fake struct {
	// NoIPVS makes CheckIPVS fail as on a kernel without IPVS.
	NoIPVS bool
	// NoDummy makes EnsureDummy fail as on a kernel without CONFIG_DUMMY.
	NoDummy bool
	// Fail, when set, is consulted before each mutating call with the
	// call's description (as in Calls); a non-nil error is returned
	// instead of making the change.
	Fail func(call string) error

	ipt *iptablestest.Fake

	mu      sync.Mutex
	vs      map[ipvs.VSKey]*fakeVS
	links   map[string]*link
	sysctls map[string]string
	sets    *ipsettest.Fake
	calls   []Call
}

// Call is one recorded call; Mutating is false for reads and for ensures
// that found everything in place.
type Call struct {
	Desc     string
	Mutating bool
}

type fakeVS struct {
	vs ipvs.VirtualServer
	rs map[netip.AddrPort]ipvs.RealServer
}

type link struct {
	typ   string
	up    bool
	addrs map[netip.Addr]bool
}

var (
	_ ipvs.Kernel    = (*Fake)(nil)
	_ command.Runner = (*Fake)(nil)
)

// New returns an empty Fake with IPVS.
func New() *Fake {
	f := &Fake{ipt: iptablestest.New(), vs: map[ipvs.VSKey]*fakeVS{}, links: map[string]*link{},
		sysctls: map[string]string{}, sets: ipsettest.New()}
	f.sets.InUse = f.setInUse
	return f
}

// IPTables is the fake behind the iptables binaries (foreign rules, dumps).
func (f *Fake) IPTables() *iptablestest.Fake { return f.ipt }

// record notes a call; for a mutating one it consults Fail. The caller
// holds f.mu.
func (f *Fake) record(mutating bool, format string, args ...any) error {
	desc := fmt.Sprintf(format, args...)
	f.calls = append(f.calls, Call{Desc: desc, Mutating: mutating})
	if mutating && f.Fail != nil {
		return f.Fail(desc)
	}
	return nil
}

// changeVS records a mutating call on virtual server k and returns k,
// which must exist (ESRCH, as the kernel answers, when it does not). The
// caller holds f.mu.
func (f *Fake) changeVS(k ipvs.VSKey, format string, args ...any) (*fakeVS, error) {
	if err := f.record(true, format, args...); err != nil {
		return nil, err
	}
	v, ok := f.vs[k]
	if !ok {
		return nil, fmt.Errorf("virtual server %s: no such process", k)
	}
	return v, nil
}

// Calls returns the recorded calls.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// MutatingCalls returns the descriptions of the calls that changed state.
func (f *Fake) MutatingCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.Mutating {
			out = append(out, c.Desc)
		}
	}
	return out
}

// ResetCalls forgets the recorded calls.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
	f.ipt.ResetCalls()
}

// CheckIPVS implements ipvs.Kernel.
func (f *Fake) CheckIPVS(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.record(false, "CheckIPVS")
	if f.NoIPVS {
		return fmt.Errorf("%w: fake kernel without IPVS", ipvs.ErrIPVSUnavailable)
	}
	return nil
}

// VirtualServers implements ipvs.Kernel.
func (f *Fake) VirtualServers(context.Context) ([]ipvs.VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.record(false, "VirtualServers")
	out := make([]ipvs.VirtualServer, 0, len(f.vs))
	for _, k := range sorted.KeysFunc(f.vs, ipvs.VSKey.Compare) {
		out = append(out, f.vs[k].vs)
	}
	return out, nil
}

func vsDesc(vs ipvs.VirtualServer) string {
	s := vs.Key.String() + " " + vs.Scheduler
	if vs.HashPort {
		s += "-port" // ipvsadm's sched-flag name: mh-port, sh-port
	}
	if vs.Timeout > 0 {
		s += fmt.Sprintf(" persistent %d", vs.Timeout)
	}
	return s
}

// AddVirtualServer implements ipvs.Kernel.
func (f *Fake) AddVirtualServer(_ context.Context, vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(true, "AddVirtualServer %s", vsDesc(vs)); err != nil {
		return err
	}
	if _, ok := f.vs[vs.Key]; ok {
		return fmt.Errorf("virtual server %s: file exists", vs.Key)
	}
	if vs.Scheduler == "" {
		return errors.New("no scheduler")
	}
	f.vs[vs.Key] = &fakeVS{vs: vs, rs: map[netip.AddrPort]ipvs.RealServer{}}
	return nil
}

// UpdateVirtualServer implements ipvs.Kernel.
func (f *Fake) UpdateVirtualServer(_ context.Context, vs ipvs.VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.changeVS(vs.Key, "UpdateVirtualServer %s", vsDesc(vs))
	if err != nil {
		return err
	}
	v.vs = vs
	return nil
}

// DeleteVirtualServer implements ipvs.Kernel.
func (f *Fake) DeleteVirtualServer(_ context.Context, k ipvs.VSKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(true, "DeleteVirtualServer %s", k); err != nil {
		return err
	}
	delete(f.vs, k)
	return nil
}

// RealServers implements ipvs.Kernel.
func (f *Fake) RealServers(_ context.Context, k ipvs.VSKey) ([]ipvs.RealServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.record(false, "RealServers %s", k)
	v, ok := f.vs[k]
	if !ok {
		return nil, fmt.Errorf("virtual server %s: no such process", k)
	}
	out := make([]ipvs.RealServer, 0, len(v.rs))
	for _, a := range sorted.KeysFunc(v.rs, netip.AddrPort.Compare) {
		out = append(out, v.rs[a])
	}
	return out, nil
}

// AddRealServer implements ipvs.Kernel.
func (f *Fake) AddRealServer(_ context.Context, k ipvs.VSKey, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.changeVS(k, "AddRealServer %s %s weight %d", k, rs.Addr, rs.Weight)
	if err != nil {
		return err
	}
	if _, dup := v.rs[rs.Addr]; dup {
		return fmt.Errorf("real server %s of %s: file exists", rs.Addr, k)
	}
	if rs.Addr.Addr().Is4() != k.Addr.Is4() {
		return fmt.Errorf("real server %s of %s: family mismatch", rs.Addr, k)
	}
	v.rs[rs.Addr] = ipvs.RealServer{Addr: rs.Addr, Weight: rs.Weight}
	return nil
}

// UpdateRealServer implements ipvs.Kernel; connection counts are kept.
func (f *Fake) UpdateRealServer(_ context.Context, k ipvs.VSKey, rs ipvs.RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.changeVS(k, "UpdateRealServer %s %s weight %d", k, rs.Addr, rs.Weight)
	if err != nil {
		return err
	}
	cur, ok := v.rs[rs.Addr]
	if !ok {
		return fmt.Errorf("real server %s of %s: no such file or directory", rs.Addr, k)
	}
	cur.Weight = rs.Weight
	v.rs[rs.Addr] = cur
	return nil
}

// DeleteRealServer implements ipvs.Kernel.
func (f *Fake) DeleteRealServer(_ context.Context, k ipvs.VSKey, a netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(true, "DeleteRealServer %s %s", k, a); err != nil {
		return err
	}
	if v, ok := f.vs[k]; ok {
		delete(v.rs, a)
	}
	return nil
}

// SetConns sets the connection counts the kernel reports for a real
// server, as traffic would.
func (f *Fake) SetConns(k ipvs.VSKey, a netip.AddrPort, active, inactive int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vs[k]
	if !ok {
		return fmt.Errorf("no virtual server %s", k)
	}
	rs, ok := v.rs[a]
	if !ok {
		return fmt.Errorf("no real server %s in %s", a, k)
	}
	rs.ActiveConns, rs.InactiveConns = active, inactive
	v.rs[a] = rs
	return nil
}

// RealServer returns one real server and whether it exists.
func (f *Fake) RealServer(k ipvs.VSKey, a netip.AddrPort) (ipvs.RealServer, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.vs[k]
	if !ok {
		return ipvs.RealServer{}, false
	}
	rs, ok := v.rs[a]
	return rs, ok
}

// AddForeign adds a virtual server and real servers as other software
// would, without recording a call (tests of ownership and Cleanup).
func (f *Fake) AddForeign(vs ipvs.VirtualServer, rss ...ipvs.RealServer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := &fakeVS{vs: vs, rs: map[netip.AddrPort]ipvs.RealServer{}}
	for _, rs := range rss {
		v.rs[rs.Addr] = rs
	}
	f.vs[vs.Key] = v
}
