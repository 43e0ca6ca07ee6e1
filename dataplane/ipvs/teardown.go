package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// cleanup removes everything of this mode: virtual servers on kube-ipvs0
// addresses or on registered node ports, the link, chains, jumps, sets.
//
// Without a set of ours and without an address on kube-ipvs0 there is
// nothing of this mode (it creates its fixed sets before any rule, and
// destroys them last), so the costly read-backs are skipped: the check
// runs on every agent start in another mode.
//
// kube-ipvs0 is shared with kube-proxy's ipvs mode on purpose, and its
// node-port virtual servers sit on the same node addresses and ports as
// ours. Where kube-proxy's canary chain is in a read-back, the link and
// every virtual server may be kube-proxy's and are left (its own sync
// deletes those it does not want); our chains and sets still go.
func (d *Dataplane) cleanup(ctx context.Context) error {
	k := d.cfg.Kernel
	addrs, err := k.Addresses(ctx, DummyInterface)
	if err != nil {
		return err
	}
	sets, err := d.readSets(ctx)
	if err != nil {
		return err
	}
	if len(sets) == 0 && len(addrs) == 0 {
		d.log.Debug("nothing of the ipvs mode found")
		return nil
	}
	var errs []error
	saved := map[dataplane.Family]savedTables{}
	kubeProxy := false
	for _, fam := range d.cfg.Families {
		st, err := d.saveRules(ctx, fam)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		saved[fam] = st
		kubeProxy = kubeProxy || xtables.HasKubeProxy(st)
	}
	if kubeProxy {
		d.log.Warn("kube-proxy's canary chain found: " + DummyInterface + " and the virtual servers are left to it " +
			"(remove them with --cleanup-kube-proxy)")
	} else {
		bound := map[netip.Addr]bool{}
		for _, a := range addrs {
			bound[a] = true
		}
		errs = append(errs, d.deleteVirtualServers(ctx, bound, ownedNodePorts(sets)))
		if err := k.DeleteLink(ctx, DummyInterface); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", DummyInterface, err))
		}
		d.stats.AddressesDeleted = len(addrs)
	}
	for _, fam := range d.cfg.Families {
		if st, ok := saved[fam]; ok {
			errs = append(errs, d.restoreRules(ctx, fam, cleanupRulesPayload(st)))
		}
	}
	var b []byte
	for _, n := range sorted.Keys(sets) {
		b = fmt.Appendf(b, "destroy %s\n", n)
	}
	// Sets still referenced (a failed rule cleanup) refuse to go; the
	// error says so and a later Cleanup retries.
	errs = append(errs, d.ipsetRestore(ctx, string(b)))
	d.log.Info("ipvs mode removed", "virtualServers", d.stats.VirtualServersDeleted,
		"addresses", d.stats.AddressesDeleted, "sets", len(sets), "linkKept", kubeProxy)
	return errors.Join(errs...)
}

// deleteVirtualServers deletes the virtual servers on a bound address or
// on one of our node ports. After a restart the node IPs of the last
// state are unknown: a virtual server on an address not bound to
// kube-ipvs0 whose port is one of our node ports is taken for ours.
func (d *Dataplane) deleteVirtualServers(ctx context.Context, bound map[netip.Addr]bool, nodePorts map[dataplane.Protocol]map[uint16]bool) error {
	k := d.cfg.Kernel
	vss, err := k.VirtualServers(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, vs := range vss {
		key := vs.Key
		if !bound[key.Addr] && !nodePorts[key.Protocol][key.Port] {
			continue
		}
		if err := k.DeleteVirtualServer(ctx, key); err != nil {
			errs = append(errs, fmt.Errorf("delete virtual server %s: %w", key, err))
			continue
		}
		d.stats.VirtualServersDeleted++
	}
	return errors.Join(errs...)
}

// Connections implements dataplane.Drainer: the active and inactive
// connections of every virtual server of this mode (on an address of
// kube-ipvs0, or one of its node ports), whatever process programmed
// them. Leftovers of kube-proxy's IPVS mode count too when they use the
// same interface: they break the same way.
func (d *Dataplane) Connections(ctx context.Context) (int, error) {
	k := d.cfg.Kernel
	addrs, err := k.Addresses(ctx, DummyInterface)
	if err != nil {
		return 0, fmt.Errorf("ipvs connections: %w", err)
	}
	sets, err := d.readSets(ctx)
	if err != nil {
		return 0, fmt.Errorf("ipvs connections: %w", err)
	}
	bound := map[netip.Addr]bool{}
	for _, a := range addrs {
		bound[a] = true
	}
	nodePorts := ownedNodePorts(sets)
	vss, err := k.VirtualServers(ctx)
	if err != nil {
		return 0, fmt.Errorf("ipvs connections: %w", err)
	}
	n := 0
	for _, vs := range vss {
		if !bound[vs.Key.Addr] && !nodePorts[vs.Key.Protocol][vs.Key.Port] {
			continue
		}
		rss, err := k.RealServers(ctx, vs.Key)
		if err != nil {
			return 0, fmt.Errorf("ipvs connections of %s: %w", vs.Key, err)
		}
		for _, rs := range rss {
			n += rs.ActiveConns + rs.InactiveConns
		}
	}
	return n, nil
}
