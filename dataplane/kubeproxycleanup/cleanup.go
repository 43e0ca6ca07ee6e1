package kubeproxycleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// Config says where to clean up.
type Config struct {
	// Runner runs the commands in the namespace to clean; required.
	Runner command.Runner
	// Logger receives one line per removed item group; nil discards.
	Logger *slog.Logger
	// KeepShared names the iptables back ends and families (an
	// iptables-save binary's base: "iptables-nft", "ip6tables-legacy", …)
	// where Switchyard's iptables mode programs now: there, the chains
	// under the names it shares with kube-proxy are its own (its sync
	// rewrote them) and are kept, so that removing kube-proxy's evidence
	// after that sync never takes a Service's path away. Its next full
	// sync, no longer seeing kube-proxy's canary, deletes the per-service
	// chains of kube-proxy's that it does not use. Everywhere else every
	// chain with one of kube-proxy's names goes.
	KeepShared []string
	// KeepDraining, when set, is asked whether kube-proxy's state stays a
	// while longer because its IPVS virtual servers still carry conns
	// connections (conns > 0). An IPVS connection is IPVS's own state,
	// not a netfilter NAT binding: deleting its virtual server or the
	// kube-ipvs0 address it answers on breaks it, while new connections
	// already take the rules of the mode that replaced kube-proxy (its
	// DNAT runs before IPVS's hooks). True keeps everything of
	// kube-proxy's, its evidence too, so that a later Run (or a
	// restarted agent) finds it again, and Run returns an error wrapping
	// dataplane.ErrDraining; false removes it now. Nil removes it at once
	// (switchyard-agent --cleanup: an explicit uninstall).
	KeepDraining func(conns int) bool
}

// Result is what Run found and removed. Items are named
// "<binary>/<table>/<chain>" for chains, "<family> <table>" for nftables
// tables, "<proto> <addr:port>" for virtual servers.
type Result struct {
	// Evidence lists what showed that kube-proxy ran here; empty means Run
	// removed nothing.
	Evidence       []string
	Chains         []string // deleted
	FlushedChains  []string // emptied but kept: foreign chains jump to them
	NFTTables      []string
	VirtualServers []string
	Links          []string
	IPSets         []string
	// Draining is the connections of kube-proxy's IPVS virtual servers
	// that KeepDraining kept everything for; 0 when Run removed it.
	Draining int
}

// Found reports whether kube-proxy state was found (and removal attempted).
func (r Result) Found() bool { return len(r.Evidence) > 0 }

// Run surveys the namespace of cfg.Runner and, when kube-proxy has left
// state there, removes all of it, unless its IPVS connections are left
// to drain first (Config.KeepDraining; see the package documentation). It
// carries on past a failing step and returns every failure joined; the
// Result lists what was removed.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Runner == nil {
		return Result{}, errors.New("kube-proxy cleanup: no runner")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &cleaner{r: cfg.Runner, log: log, keepShared: cfg.KeepShared}
	s := c.survey(ctx)
	res := Result{Evidence: s.evidence()}
	if !res.Found() {
		log.Info("no kube-proxy state found; nothing removed")
		return res, errors.Join(s.errs...)
	}
	// Read only where kube-proxy ran: kube-ipvs0 is this agent's too
	// in its ipvs mode.
	c.surveyIPVS(ctx, &s)
	if n := s.ipvsConns(); n > 0 && cfg.KeepDraining != nil && cfg.KeepDraining(n) {
		res.Draining = n
		log.Debug("kube-proxy state kept while its IPVS connections drain", "evidence", res.Evidence, "connections", n)
		return res, errors.Join(append(s.errs, fmt.Errorf("kube-proxy's state kept for %d IPVS connections: %w", n, dataplane.ErrDraining))...)
	}
	log.Info("kube-proxy state found; removing it", "evidence", res.Evidence)
	errs := s.errs
	// iptables first: its rules reference the ipsets, and ipsets in use
	// cannot be destroyed.
	for _, t := range s.iptables {
		deleted, flushed, err := c.cleanIPTables(ctx, t)
		res.Chains = append(res.Chains, deleted...)
		res.FlushedChains = append(res.FlushedChains, flushed...)
		errs = append(errs, err)
	}
	for _, fam := range s.nftTables {
		if _, err := c.r.Run(ctx, []string{"nft", "delete", "table", fam, nftTable}, nil); err != nil {
			errs = append(errs, fmt.Errorf("delete nftables table %s %s: %w", fam, nftTable, err))
			continue
		}
		res.NFTTables = append(res.NFTTables, fam+" "+nftTable)
	}
	vs, err := c.cleanIPVS(ctx, s)
	res.VirtualServers = vs
	errs = append(errs, err)
	if s.ipvsLink {
		if _, err := c.r.Run(ctx, []string{"ip", "link", "del", ipvsLink}, nil); err != nil {
			errs = append(errs, fmt.Errorf("delete link %s: %w", ipvsLink, err))
		} else {
			res.Links = append(res.Links, ipvsLink)
		}
	}
	sets, err := c.cleanIPSets(ctx, s.ipsets)
	res.IPSets = sets
	errs = append(errs, err)
	log.Info("kube-proxy state removed", "chains", len(res.Chains), "flushedChains", res.FlushedChains,
		"nftTables", res.NFTTables, "virtualServers", len(res.VirtualServers), "links", res.Links, "ipsets", len(res.IPSets))
	return res, errors.Join(errs...)
}

type cleaner struct {
	r          command.Runner
	log        *slog.Logger
	keepShared []string
}

// survey is the node's state as far as kube-proxy is concerned, read
// before anything is changed.
type survey struct {
	iptables  []*savedDump // one per back end and family that answered
	nftTables []string     // families ("ip", "ip6") that have a kube-proxy table
	ipvsLink  bool
	ipvsAddrs map[string]bool // addresses bound to kube-ipvs0
	ipsets    []string        // kube-proxy's ipsets present
	ipvs      []virtualServer // kube-proxy's (surveyIPVS)
	errs      []error
}

func (s *survey) evidence() []string {
	var ev []string
	for _, d := range s.iptables {
		for _, tbl := range d.order {
			for _, ch := range d.tables[tbl].chains {
				if ch == xtables.KubeProxyCanary || isKubeProxyOnly(ch) {
					ev = append(ev, d.save+"/"+tbl+"/"+ch)
				}
			}
		}
	}
	for _, fam := range s.nftTables {
		ev = append(ev, "nftables "+fam+" "+nftTable)
	}
	// kube-ipvs0 and kube-proxy's ipsets are kube-proxy's names too, but a
	// future Switchyard ipvs mode may reuse them, so they are removed with
	// the rest, never evidence on their own.
	return ev
}

// saveBinaries are the iptables back ends and families to clean: kube-proxy
// used whichever its iptables-wrapper picked, which need not be the one
// Switchyard picks now.
var saveBinaries = []string{"iptables-legacy", "ip6tables-legacy", "iptables-nft", "ip6tables-nft"}

func (c *cleaner) survey(ctx context.Context) survey {
	var s survey
	for _, bin := range saveBinaries {
		out, err := c.r.Run(ctx, []string{bin + "-save"}, nil)
		if err != nil {
			// Not installed, or the kernel lacks this back end: then
			// kube-proxy left nothing there either.
			c.log.Debug("iptables back end not readable; skipped", "binary", bin, "err", err)
			continue
		}
		d, err := parseSave(out)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s-save: %w", bin, err))
			continue
		}
		d.bin, d.save = bin, bin+"-save"
		s.iptables = append(s.iptables, d)
	}
	if out, err := c.r.Run(ctx, []string{"nft", "list", "tables"}, nil); err != nil {
		c.log.Debug("nftables not readable; skipped", "err", err)
	} else {
		s.nftTables = kubeProxyNFTFamilies(string(out))
	}
	s.ipvsLink, s.ipvsAddrs = c.surveyLink(ctx)
	if out, err := c.r.Run(ctx, []string{"ipset", "list", "-n"}, nil); err != nil {
		c.log.Debug("ipset not readable; skipped", "err", err)
	} else {
		s.ipsets = kubeProxyIPSets(string(out))
	}
	return s
}

// surveyLink reports whether kube-ipvs0 exists and the addresses on it.
func (c *cleaner) surveyLink(ctx context.Context) (bool, map[string]bool) {
	out, err := c.r.Run(ctx, []string{"ip", "-o", "addr", "show", "dev", ipvsLink}, nil)
	if err != nil {
		// "Device does not exist" is the normal case.
		return false, nil
	}
	addrs := map[string]bool{}
	for line := range strings.SplitSeq(string(out), "\n") {
		// 5: kube-ipvs0    inet 10.96.0.1/32 scope global kube-ipvs0\ ...
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" || f[i] == "inet6" {
				a, _, _ := strings.Cut(f[i+1], "/")
				addrs[a] = true
			}
		}
	}
	return true, addrs
}

// isNotFound reports whether err says a binary is missing.
func isNotFound(err error) bool { return errors.Is(err, exec.ErrNotFound) }
