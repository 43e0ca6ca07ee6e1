package iptables

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// cleanupFlavours are the back ends Cleanup reads: this mode's rules may
// be in either, whichever xtables.DetectFlavour chose when they were
// written (a node whose kubelet changed back ends, an image of another
// default), and a stale legacy DNAT wins over an nft one.
var cleanupFlavours = []xtables.Flavour{xtables.FlavourLegacy, xtables.FlavourNFT}

// Cleanup implements dataplane.Dataplane: in every family and in both
// back ends (legacy and nft) it deletes this mode's chains and its rules
// in other chains (jumps from built-in chains, jumps to the chains only it
// names, rules matching its hairpin sets), then the hairpin sets. Where a
// back end holds kube-proxy's canary, chains under the names kube-proxy
// shares with this mode are left (see ownership). Every other rule, chain
// and set stays. It works without a prior Apply, on what an earlier
// process left, and the next Apply is a full one.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	var clean []dataplane.Family
	d.markKnown = false
	for _, fam := range d.cfg.Families {
		delete(d.state, fam)
		delete(d.udp, fam)
		delete(d.hairpin, fam)
		delete(d.relearn, fam)
		delete(d.clean, fam)
		if err := d.cleanupFamily(ctx, fam); err != nil {
			errs = append(errs, fmt.Errorf("iptables cleanup %s: %w", fam, err))
			continue
		}
		clean = append(clean, fam)
	}
	// Only now are the rules matching the sets gone.
	if err := d.destroySets(ctx, clean); err != nil {
		errs = append(errs, fmt.Errorf("iptables cleanup: %w", err))
	}
	return errors.Join(errs...)
}

// cleanupFamily cleans fam in every back end that answers. A back end
// whose binary is missing, or that the kernel lacks, cannot hold rules of
// ours; but when none answers at all the namespace is unreadable and that
// is an error.
func (d *Dataplane) cleanupFamily(ctx context.Context, fam dataplane.Family) error {
	var unreadable []error
	read := 0
	for _, fl := range cleanupFlavours {
		save := fl.SaveCmd(fam)
		out, err := d.cfg.Runner.Run(ctx, []string{save}, nil)
		if err != nil {
			if !command.IsNotFound(err) {
				unreadable = append(unreadable, fmt.Errorf("%s: %w", save, err))
			}
			d.log.Debug("iptables back end not readable; nothing of ours there", "command", save, "err", err)
			continue
		}
		read++
		saved, _ := xtables.ParseSave(out)
		if err := d.cleanupSaved(ctx, fam, fl, saved); err != nil {
			return err
		}
	}
	if read == 0 && len(unreadable) > 0 {
		return fmt.Errorf("no iptables back end readable: %w", errors.Join(unreadable...))
	}
	return nil
}

func (d *Dataplane) cleanupSaved(ctx context.Context, fam dataplane.Family, fl xtables.Flavour, saved map[string]*xtables.SavedTable) error {
	kubeProxy := xtables.HasKubeProxy(saved)
	c := xtables.CleanupPayload(saved, ownership(kubeProxy))
	if kubeProxy {
		d.log.Warn("kube-proxy's canary chain found: chains named like kube-proxy's are left to it "+
			"(remove them with --cleanup-kube-proxy)", "family", fam.String(), "flavour", string(fl))
	}
	if c.Payload == "" {
		return nil
	}
	argv := []string{fl.RestoreCmd(fam), "-w", "--noflush"}
	if _, err := d.cfg.Runner.Run(ctx, argv, []byte(c.Payload)); err != nil {
		return fmt.Errorf("remove chains with %s: %w", argv[0], err)
	}
	d.log.Info("iptables rules removed", "family", fam.String(), "flavour", string(fl),
		"chainsDeleted", len(c.Deleted), "rulesDeleted", c.Rules, "chainsKeptEmpty", c.Kept)
	return nil
}
