package iptables

import (
	"fmt"
	"testing"

	"github.com/mdlayher/netlink"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/iptables"
	"github.com/switchyard-proxy/switchyard/dataplane/nftgen"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/dataplane/xtinfo"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// BenchmarkCheckDrift measures CheckDrift in a throwaway node namespace,
// IPv4, 5 endpoints per service (dptest.BenchState), commands forked
// from a thread in the namespace, for each way of knowing that nothing
// changed: nft with the generation, legacy with the x_tables info, and
// legacy without a mark (every check reads back):
//   - unchanged: nothing changed since the last check (without a mark:
//     a read-back whose output hashes as the last clean one, not parsed);
//   - foreign-change: a foreign rule was added before each check (not
//     timed), so the check reads back (iptables-save, ipset save),
//     parses, compares and finds nothing.
//
// self-cpu-us/op is this process's CPU during the checks, tools-cpu-us/op
// the forked commands' (dptest.BenchCheckDrift).
func BenchmarkCheckDrift(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, mk := range []string{"nft+generation", "legacy+info", "legacy"} {
			b.Run(fmt.Sprintf("services=%d/%s", n, mk), func(b *testing.B) { benchCheck(b, n, mk) })
		}
	}
}

func benchCheck(b *testing.B, n int, mk string) {
	topo, r := dptest.BenchNode(b, dptest.RunnerOptions{Fork: true})
	ns := topo.Node(0).NS
	cfg := iptables.Config{Runner: r, Families: []dataplane.Family{dataplane.IPv4}, Flavour: xtables.FlavourLegacy}
	switch mk {
	case "nft+generation":
		gen := nftgen.NewReader(func() (*netlink.Conn, error) {
			var c *netlink.Conn
			err := topo.Do(ns, func() (err error) { c, err = nftgen.DialOwnNamespace(); return err })
			return c, err
		})
		b.Cleanup(func() { _ = gen.Close() })
		cfg.Flavour, cfg.Generation = xtables.FlavourNFT, gen.Generation
	case "legacy+info":
		info := xtinfo.NewReader(func(family int) (int, error) {
			fd := -1
			err := topo.Do(ns, func() (err error) { fd, err = xtinfo.DialOwnNamespace(family); return err })
			return fd, err
		})
		b.Cleanup(func() { _ = info.Close() })
		cfg.LegacyInfo = info.Info
	}
	dp, err := iptables.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dptest.BenchCheckDrift(b, r, dp, n, mk == "legacy", func(b *testing.B, i int) {
		rule := []string{"iptables-" + string(cfg.Flavour), "-t", "filter", "-A", "INPUT", "-s", fmt.Sprintf("192.0.%d.%d", 2+i/250, i%250+1), "-j", "ACCEPT"}
		if _, err := r.Run(b.Context(), rule, nil); err != nil {
			b.Fatal(err)
		}
	})
}
