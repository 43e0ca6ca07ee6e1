package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/ipset"
)

// readKernel reads back what the kernel holds of this mode. want tells
// which virtual servers are ours beyond those on kube-ipvs0 addresses:
// those on its node IPs whose port is a registered node port.
func (d *Dataplane) readKernel(ctx context.Context, want *desired) (*model, error) {
	m := newModel()
	addrs, err := d.cfg.Kernel.Addresses(ctx, DummyInterface)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if d.hasFamily(a) {
			m.addrs[a] = true
		}
	}
	sets, err := d.readSets(ctx)
	if err != nil {
		return nil, err
	}
	for n, s := range sets {
		if want.sets[n] != nil {
			m.sets[n] = s
		}
	}
	for _, fam := range d.cfg.Families {
		st, err := d.saveRules(ctx, fam)
		if err != nil {
			return nil, err
		}
		m.rules[fam] = st.ours()
	}
	vss, err := d.cfg.Kernel.VirtualServers(ctx)
	if err != nil {
		return nil, err
	}
	nodePorts := ownedNodePorts(sets, want.sets)
	for _, vs := range vss {
		k := vs.Key
		owned := m.addrs[k.Addr] || want.addrs[k.Addr] ||
			(want.nodeIPs[k.Addr] && nodePorts[k.Protocol][k.Port])
		if !owned || !d.hasFamily(k.Addr) {
			continue
		}
		rss, err := d.cfg.Kernel.RealServers(ctx, k)
		if err != nil {
			return nil, err
		}
		vm := &vsModel{vs: vs, rs: map[netip.AddrPort]RealServer{}}
		for _, rs := range rss {
			vm.rs[rs.Addr] = rs
		}
		m.vs[k] = vm
	}
	return m, nil
}

func (d *Dataplane) hasFamily(a netip.Addr) bool {
	for _, f := range d.cfg.Families {
		if a.Is4() == (f == dataplane.IPv4) {
			return true
		}
	}
	return false
}

// ownedNodePorts collects the node ports registered in our node-port sets
// of any of the given set maps, by protocol.
func ownedNodePorts(setMaps ...map[string]*ipset.Set) map[dataplane.Protocol]map[uint16]bool {
	out := map[dataplane.Protocol]map[uint16]bool{}
	for _, p := range nodePortProtocols {
		out[p] = map[uint16]bool{}
		for _, sets := range setMaps {
			for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
				for _, local := range []bool{false, true} {
					s := sets[setName(fam, nodePortSet(p, local))]
					if s == nil {
						continue
					}
					for m := range s.Members {
						if n, err := strconv.ParseUint(m, 10, 16); err == nil {
							out[p][uint16(n)] = true
						}
					}
				}
			}
		}
	}
	return out
}

// sync changes the kernel from have to want, updating have as each change
// succeeds. Order: sets and members the rules match, rules, virtual and
// real servers, addresses (bound only once their virtual servers exist),
// then removals: addresses, real and virtual servers, set members.
func (d *Dataplane) sync(ctx context.Context, have *model, want *desired) error {
	// The removals are planned now too: until they run, have only gains
	// want's members, which they do not delete.
	add, remove, err := planSets(have.sets, want.sets)
	if err != nil {
		return err
	}
	if err := d.ipsetRestore(ctx, add); err != nil {
		return err
	}
	for n, s := range want.sets {
		h := have.sets[n]
		if h == nil {
			h = &ipset.Set{Spec: s.Spec, Members: map[string]bool{}}
			have.sets[n] = h
		}
		for m := range s.Members {
			h.Members[m] = true
		}
	}
	for _, fam := range d.cfg.Families {
		if err := d.restoreRules(ctx, fam, rulesPayload(have.rules[fam], want.rules[fam])); err != nil {
			return err
		}
		have.rules[fam] = cloneRuleset(want.rules[fam])
	}
	if len(want.addrs) > 0 && !have.linkUp {
		if err := d.cfg.Kernel.EnsureDummy(ctx, DummyInterface); err != nil {
			return err
		}
		have.linkUp = true
	}
	if err := d.addServers(ctx, have, want); err != nil {
		return err
	}
	if err := d.syncAddresses(ctx, have, want); err != nil {
		return err
	}
	if err := d.removeServers(ctx, have, want); err != nil {
		return err
	}
	if err := d.ipsetRestore(ctx, remove); err != nil {
		return err
	}
	for n, s := range want.sets {
		have.sets[n] = s.Clone()
	}
	return nil
}

// addServers creates and updates wanted virtual servers and real servers.
// A virtual server without a wanted real server is not created.
func (d *Dataplane) addServers(ctx context.Context, have *model, want *desired) error {
	k := d.cfg.Kernel
	for _, key := range sorted.KeysFunc(want.vs, VSKey.Compare) {
		wv, hv := want.vs[key], have.vs[key]
		switch {
		case hv == nil && len(wv.rs) == 0:
			continue
		case hv == nil:
			if err := k.AddVirtualServer(ctx, wv.vs); err != nil {
				return fmt.Errorf("add virtual server %s: %w", key, err)
			}
			d.stats.VirtualServersAdded++
			hv = &vsModel{vs: wv.vs, rs: map[netip.AddrPort]RealServer{}}
			have.vs[key] = hv
		case hv.vs != wv.vs:
			if err := k.UpdateVirtualServer(ctx, wv.vs); err != nil {
				return fmt.Errorf("update virtual server %s: %w", key, err)
			}
			d.stats.VirtualServersUpdated++
			hv.vs = wv.vs
		}
		hv.drainOnly = len(wv.rs) == 0
		for _, a := range sorted.KeysFunc(wv.rs, netip.AddrPort.Compare) {
			w := wv.rs[a]
			h, ok := hv.rs[a]
			switch {
			case !ok:
				if err := k.AddRealServer(ctx, key, w); err != nil {
					return fmt.Errorf("add real server %s to %s: %w", a, key, err)
				}
				d.stats.RealServersAdded++
				hv.rs[a] = w
			case h.Weight != w.Weight:
				// Also what brings back a real server left at weight 0 by
				// a drain that an agent restart interrupted.
				if err := k.UpdateRealServer(ctx, key, w); err != nil {
					return fmt.Errorf("weight real server %s of %s: %w", a, key, err)
				}
				d.stats.RealServersUpdated++
				h.Weight = w.Weight
				hv.rs[a] = h
			}
			delete(d.draining, rsKey{key, a})
		}
	}
	return nil
}

func (d *Dataplane) syncAddresses(ctx context.Context, have *model, want *desired) error {
	for _, a := range sorted.KeysFunc(want.addrs, netip.Addr.Compare) {
		if have.addrs[a] {
			continue
		}
		if err := d.cfg.Kernel.AddAddress(ctx, DummyInterface, a); err != nil {
			return err
		}
		d.stats.AddressesAdded++
		have.addrs[a] = true
	}
	for _, a := range sorted.KeysFunc(have.addrs, netip.Addr.Compare) {
		if want.addrs[a] {
			continue
		}
		if err := d.cfg.Kernel.DeleteAddress(ctx, DummyInterface, a); err != nil {
			return err
		}
		d.stats.AddressesDeleted++
		delete(have.addrs, a)
	}
	return nil
}

// removeServers deletes virtual servers the state no longer has (their
// address is gone: nothing reaches them any more) and starts draining the
// real servers that are no longer wanted: UDP ones go at once, TCP and
// SCTP ones get weight 0 and wait for Drain.
func (d *Dataplane) removeServers(ctx context.Context, have *model, want *desired) error {
	k := d.cfg.Kernel
	for _, key := range sorted.KeysFunc(have.vs, VSKey.Compare) {
		hv, wv := have.vs[key], want.vs[key]
		if wv == nil {
			if err := k.DeleteVirtualServer(ctx, key); err != nil {
				return fmt.Errorf("delete virtual server %s: %w", key, err)
			}
			d.stats.VirtualServersDeleted++
			delete(have.vs, key)
			d.forgetDrains(key, hv)
			continue
		}
		for _, a := range sorted.KeysFunc(hv.rs, netip.AddrPort.Compare) {
			if _, ok := wv.rs[a]; ok {
				continue
			}
			rk := rsKey{key, a}
			if key.Protocol == dataplane.UDP {
				if err := k.DeleteRealServer(ctx, key, a); err != nil {
					return fmt.Errorf("delete real server %s of %s: %w", a, key, err)
				}
				d.stats.RealServersDeleted++
				delete(hv.rs, a)
				delete(d.draining, rk)
				continue
			}
			if h := hv.rs[a]; h.Weight != 0 {
				h.Weight = 0
				if err := k.UpdateRealServer(ctx, key, h); err != nil {
					return fmt.Errorf("quiesce real server %s of %s: %w", a, key, err)
				}
				d.stats.RealServersUpdated++
				hv.rs[a] = h
			}
			if _, ok := d.draining[rk]; !ok {
				d.draining[rk] = d.deadline()
				d.log.Debug("real server draining", "virtualServer", key.String(), "realServer", a.String())
			}
		}
		if hv.drainOnly && len(hv.rs) == 0 {
			if err := k.DeleteVirtualServer(ctx, key); err != nil {
				return fmt.Errorf("delete virtual server %s: %w", key, err)
			}
			d.stats.VirtualServersDeleted++
			delete(have.vs, key)
		}
	}
	return nil
}

func (d *Dataplane) forgetDrains(key VSKey, hv *vsModel) {
	for a := range hv.rs {
		delete(d.draining, rsKey{key, a})
	}
}

// drainLocked deletes draining real servers without connections or past
// their deadline, then virtual servers left empty that the state wants
// without real servers.
func (d *Dataplane) drainLocked(ctx context.Context) error {
	if d.applied == nil || len(d.draining) == 0 {
		return nil
	}
	byVS := map[VSKey]*vsModel{}
	for rk := range d.draining {
		hv := d.applied.vs[rk.vs]
		if hv == nil {
			delete(d.draining, rk)
			continue
		}
		byVS[rk.vs] = hv
	}
	now := d.clock.Now()
	var errs []error
	for _, key := range sorted.KeysFunc(byVS, VSKey.Compare) {
		hv := byVS[key]
		list, err := d.cfg.Kernel.RealServers(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got := map[netip.AddrPort]RealServer{}
		for _, rs := range list {
			got[rs.Addr] = rs
		}
		for _, a := range sorted.KeysFunc(hv.rs, netip.AddrPort.Compare) {
			rk := rsKey{key, a}
			deadline, draining := d.draining[rk]
			if !draining {
				continue
			}
			rs, present := got[a]
			switch {
			case !present:
			case rs.ActiveConns+rs.InactiveConns == 0 || !now.Before(deadline):
				if err := d.cfg.Kernel.DeleteRealServer(ctx, key, a); err != nil {
					errs = append(errs, fmt.Errorf("delete drained real server %s of %s: %w", a, key, err))
					continue
				}
				d.stats.RealServersDeleted++
				d.log.Debug("real server drained", "virtualServer", key.String(), "realServer", a.String(),
					"activeConns", rs.ActiveConns, "inactiveConns", rs.InactiveConns)
			default:
				continue
			}
			delete(d.draining, rk)
			delete(hv.rs, a)
		}
		if hv.drainOnly && len(hv.rs) == 0 {
			if err := d.cfg.Kernel.DeleteVirtualServer(ctx, key); err != nil {
				errs = append(errs, fmt.Errorf("delete virtual server %s: %w", key, err))
				continue
			}
			d.stats.VirtualServersDeleted++
			delete(d.applied.vs, key)
		}
	}
	return errors.Join(errs...)
}
