package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/command"
	"github.com/switchyard-proxy/switchyard/dataplane/kubeproxycleanup"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/drain"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/health"
)

// DefaultHealthzAddress is kube-proxy's default --healthz-bind-address
// port, on the node's loopback (kube-proxy binds 0.0.0.0:10256).
const DefaultHealthzAddress = "127.0.0.1:10256"

// ErrLive says kube-proxy runs on this node: its rules stay until it stops.
var ErrLive = errors.New("kube-proxy is running on this node")

// Config configures a KubeProxy.
type Config struct {
	// HealthzAddress is where kube-proxy serves /healthz; empty never
	// finds it running.
	HealthzAddress string
	// Runner runs the clean-up's commands in the node's namespace.
	Runner command.Runner
	// Client probes HealthzAddress; a client with a 1 s timeout when nil.
	Client *http.Client
	Logger *slog.Logger
	// MaxDrain bounds how long kube-proxy's state stays for the
	// connections its IPVS virtual servers carry (its ipvs mode) once
	// this agent forwards; 0 means drain.DefaultMax.
	MaxDrain time.Duration
	// Now reads the clock; time.Now when nil.
	Now func() time.Time
}

// errDraining is the error Adopt returns while kube-proxy's IPVS
// connections drain: with dataplane.ErrDraining, and one message for the
// whole drain, so that the caller logs it once.
var errDraining = fmt.Errorf("kube-proxy's state kept while its IPVS connections drain (new connections take this agent's rules): %w", dataplane.ErrDraining)

// KubeProxy is kube-proxy as seen from the agent on the same node. It is
// safe for concurrent use.
type KubeProxy struct {
	cfg Config

	mu sync.Mutex
	// drain is the drain of kube-proxy's IPVS connections Adopt found.
	drain drain.Bound
}

// New returns the KubeProxy of cfg.
func New(cfg Config) *KubeProxy {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &KubeProxy{cfg: cfg, drain: drain.Bound{What: "kube-proxy's IPVS state", Max: cfg.MaxDrain, Now: cfg.Now, Log: cfg.Logger}}
}

// Live reports whether a kube-proxy process serves its /healthz, with what
// it answered (or why it is taken for stopped).
func (k *KubeProxy) Live(ctx context.Context) (bool, string) {
	live, _, detail := k.probe(ctx)
	return live, detail
}

// Healthy reports whether kube-proxy serves its /healthz, answers 200, and
// has programmed its rules over dp's: in the iptables mode, its sync
// rewrote KUBE-SERVICES, which no longer jumps to this mode's
// KUBE-SHARD-* chains, or, for kube-proxy's nftables mode, which leaves
// KUBE-SERVICES to this mode, its table of the family holds its service
// map's elements. kube-proxy answers 200 before its first sync too, and
// removing the shards before that sync left the cluster IPs without a
// rule for a moment (seen on the real-cluster bed).
func (k *KubeProxy) Healthy(ctx context.Context, dp dataplane.Dataplane) (bool, string) {
	live, code, detail := k.probe(ctx)
	if !live || code != http.StatusOK {
		return false, detail
	}
	f, ok := dp.(interface{ Flavour() xtables.Flavour })
	if !ok || f.Flavour() == xtables.FlavourAuto {
		return true, detail
	}
	for _, fam := range []struct{ save, nft string }{
		{"iptables-" + string(f.Flavour()) + "-save", "ip"},
		{"ip6tables-" + string(f.Flavour()) + "-save", "ip6"},
	} {
		out, err := k.cfg.Runner.Run(ctx, []string{fam.save, "-t", "nat"}, nil)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", fam.save, err)
		}
		if !bytes.Contains(out, []byte("-A KUBE-SERVICES ")) || !bytes.Contains(out, []byte("-j KUBE-SHARD-")) {
			continue
		}
		if k.nftablesSynced(ctx, fam.nft) {
			continue
		}
		return false, fam.save + ": KUBE-SERVICES still this agent's and kube-proxy's " + fam.nft + " nftables table unsynced (kube-proxy has not synced yet)"
	}
	return true, detail
}

// nftablesSynced reports whether kube-proxy's nftables mode has synced
// family's table: its map of service addresses has elements (every
// cluster has the kubernetes Service).
func (k *KubeProxy) nftablesSynced(ctx context.Context, family string) bool {
	out, err := k.cfg.Runner.Run(ctx, []string{"nft", "list", "map", family, "kube-proxy", "service-ips"}, nil)
	return err == nil && bytes.Contains(out, []byte("elements = {"))
}

// Returned reports kube-proxy's evidence in the kernel (its nftables
// tables, its canary chain in the back ends it may use): after Adopt
// removed it, kube-proxy runs again. It reads only what is cheap
// (kubeproxycleanup.Present).
func (k *KubeProxy) Returned(ctx context.Context, dp dataplane.Dataplane) (bool, string, error) {
	flavours := []xtables.Flavour{xtables.FlavourNFT, xtables.FlavourLegacy}
	if f, ok := dp.(interface{ Flavour() xtables.Flavour }); ok && f.Flavour() != xtables.FlavourAuto {
		// kube-proxy's iptables-wrapper picks the flavour this mode picked.
		flavours = []xtables.Flavour{f.Flavour()}
	}
	ev, err := kubeproxycleanup.Present(ctx, k.cfg.Runner, flavours...)
	if len(ev) > 0 {
		return true, strings.Join(ev, ", "), nil
	}
	return false, "", err
}

// probe GETs kube-proxy's /healthz: live when something other than this
// agent answers, with the status code.
func (k *KubeProxy) probe(ctx context.Context) (live bool, code int, detail string) {
	if k.cfg.HealthzAddress == "" {
		return false, 0, "no kube-proxy health address to probe"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+k.cfg.HealthzAddress+"/healthz", nil)
	if err != nil {
		return false, 0, err.Error()
	}
	resp, err := k.cfg.Client.Do(req)
	if err != nil {
		return false, 0, "health probe: " + err.Error()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	_ = resp.Body.Close()
	if resp.Header.Get(health.AgentHeader) != "" {
		// This agent holds the port: kube-proxy cannot serve there.
		return false, resp.StatusCode, "the health address is this agent's"
	}
	return true, resp.StatusCode, fmt.Sprintf("%s/healthz answered %s", k.cfg.HealthzAddress, resp.Status)
}

// Adopt removes what kube-proxy left on the node, dp being the dataplane
// that forwards now; resync asks for a full sync (iptables mode). It
// returns ErrLive, wrapped, while kube-proxy runs, and an error wrapping
// dataplane.ErrDraining while kube-proxy's IPVS virtual servers carry
// connections (at most MaxDrain): they would break with them, and new
// connections already take dp's rules.
func (k *KubeProxy) Adopt(ctx context.Context, dp dataplane.Dataplane) (resync bool, err error) {
	if live, detail := k.Live(ctx); live {
		return false, fmt.Errorf("%w (%s): its rules stay until it stops", ErrLive, detail)
	}
	cfg := kubeproxycleanup.Config{Runner: k.cfg.Runner, Logger: k.cfg.Logger, KeepDraining: k.keepDraining}
	// Only the iptables mode says its back end: the one mode that shares
	// kube-proxy's chain names.
	f, iptables := dp.(interface{ Flavour() xtables.Flavour })
	if !iptables && strings.Contains(strings.ToLower(dp.Mode()), "iptables") {
		// A wrapper hides the back end: removing every chain of
		// kube-proxy's names would take this mode's own.
		return false, fmt.Errorf("mode %s does not say its iptables back end", dp.Mode())
	}
	if iptables {
		if f.Flavour() == xtables.FlavourAuto {
			return false, errors.New("the iptables mode has not told its back end yet")
		}
		cfg.KeepShared = backEnds(f.Flavour())
	}
	res, err := kubeproxycleanup.Run(ctx, cfg)
	if res.Draining > 0 && errors.Is(err, dataplane.ErrDraining) {
		return false, errDraining
	}
	k.drained()
	if err != nil {
		return false, fmt.Errorf("remove kube-proxy's leftovers: %w", err)
	}
	return iptables && res.Found(), nil
}

// keepDraining is kubeproxycleanup's KeepDraining: kube-proxy's state
// stays while its IPVS virtual servers carry conns connections, until
// MaxDrain passed since they were first seen.
func (k *KubeProxy) keepDraining(conns int) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.drain.Keep(conns)
}

// drained ends a drain: Run removed kube-proxy's state, or found none.
func (k *KubeProxy) drained() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.drain.End()
}

// backEnds are the iptables binaries' bases a flavour programs, for both
// families.
func backEnds(f xtables.Flavour) []string {
	return []string{"iptables-" + string(f), "ip6tables-" + string(f)}
}
