package ipvstest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// EnsureDummy implements ipvs.Kernel.
func (f *Fake) EnsureDummy(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.links[name]
	if ok && l.typ == "dummy" && l.up {
		return f.record(false, "EnsureDummy %s (present)", name)
	}
	if err := f.record(true, "EnsureDummy %s", name); err != nil {
		return err
	}
	switch {
	case f.NoDummy:
		return fmt.Errorf("add dummy link %s: operation not supported", name)
	case ok && l.typ != "dummy":
		return fmt.Errorf("link %s is a %s", name, l.typ)
	case !ok:
		l = &link{typ: "dummy", addrs: map[netip.Addr]bool{}}
		f.links[name] = l
	}
	l.up = true
	return nil
}

// AddLink adds a link of another type, as other software would.
func (f *Fake) AddLink(name, typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links[name] = &link{typ: typ, up: true, addrs: map[netip.Addr]bool{}}
}

// DeleteLink implements ipvs.Kernel.
func (f *Fake) DeleteLink(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.links[name]; !ok {
		return f.record(false, "DeleteLink %s (absent)", name)
	}
	if err := f.record(true, "DeleteLink %s", name); err != nil {
		return err
	}
	delete(f.links, name)
	return nil
}

// Addresses implements ipvs.Kernel.
func (f *Fake) Addresses(_ context.Context, name string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.record(false, "Addresses %s", name)
	l, ok := f.links[name]
	if !ok {
		return nil, nil
	}
	return sorted.KeysFunc(l.addrs, netip.Addr.Compare), nil
}

// AddAddress implements ipvs.Kernel.
func (f *Fake) AddAddress(_ context.Context, name string, a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(true, "AddAddress %s %s", name, a); err != nil {
		return err
	}
	l, ok := f.links[name]
	if !ok {
		return fmt.Errorf("link %s: no such device", name)
	}
	l.addrs[a] = true
	return nil
}

// DeleteAddress implements ipvs.Kernel.
func (f *Fake) DeleteAddress(_ context.Context, name string, a netip.Addr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(true, "DeleteAddress %s %s", name, a); err != nil {
		return err
	}
	if l, ok := f.links[name]; ok {
		delete(l.addrs, a)
	}
	return nil
}

// Sysctl implements ipvs.Kernel; unset sysctls read as "0".
func (f *Fake) Sysctl(_ context.Context, name string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = f.record(false, "Sysctl %s", name)
	if v, ok := f.sysctls[name]; ok {
		return v, nil
	}
	return "0", nil
}

// SetSysctl implements ipvs.Kernel.
func (f *Fake) SetSysctl(_ context.Context, name, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record(true, "SetSysctl %s=%s", name, value); err != nil {
		return err
	}
	if name == "" {
		return errors.New("empty sysctl name")
	}
	f.sysctls[name] = value
	return nil
}

// SysctlValue returns a sysctl as set, "" when never set.
func (f *Fake) SysctlValue(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sysctls[name]
}
