package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/peer"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/syncer"
)

// Config is the agent's configuration: the --config YAML file (in the
// spirit of KubeProxyConfiguration) has the same fields as the flags, and
// flags given on the command line override it.
type Config struct {
	ControlPlanes          []string `json:"controlPlanes,omitempty"`
	NodeName               string   `json:"nodeName,omitempty"`
	Mode                   string   `json:"mode,omitempty"`
	StateDir               string   `json:"stateDir,omitempty"`
	HealthzBindAddress     string   `json:"healthzBindAddress,omitempty"`
	MetricsBindAddress     string   `json:"metricsBindAddress,omitempty"`
	HealthCheckBindAddress string   `json:"healthCheckBindAddress,omitempty"`
	CAFile                 string   `json:"caFile,omitempty"`
	CertFile               string   `json:"certFile,omitempty"`
	KeyFile                string   `json:"keyFile,omitempty"`
	Insecure               bool     `json:"insecure,omitempty"`
	MinSyncPeriod          Duration `json:"minSyncPeriod,omitzero"`
	SyncPacing             string   `json:"syncPacing,omitempty"`
	SyncPeriod             Duration `json:"syncPeriod,omitzero"`
	DriftCheckInterval     Duration `json:"driftCheckInterval,omitzero"`
	// ConntrackReconcileInterval: see the flag.
	ConntrackReconcileInterval Duration `json:"conntrackReconcileInterval,omitzero"`
	DatapathCanary             string   `json:"datapathCanary,omitempty"`
	DatapathCanaryPort         int      `json:"datapathCanaryPort,omitempty"`
	DatapathProbeInterval      Duration `json:"datapathProbeInterval,omitzero"`
	LogLevel                   string   `json:"logLevel,omitempty"`
	LogFormat                  string   `json:"logFormat,omitempty"`
	CleanupKubeProxy           bool     `json:"cleanupKubeProxy,omitempty"`
	KubeProxyHealthzAddress    string   `json:"kubeProxyHealthzAddress,omitempty"`
	GCPercent                  int      `json:"gcPercent,omitempty"`
	EnableProfiling            bool     `json:"enableProfiling,omitempty"`
	// Cleanup is the one-shot --cleanup: a flag only, never in the file,
	// where a DaemonSet's config would make every start remove the rules
	// and exit.
	Cleanup bool `json:"-"`
}

// Duration is a time.Duration written as "1s" in the config file.
type Duration struct{ time.Duration }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func defaults(env func(string) string) Config {
	return Config{
		NodeName:                env("NODE_NAME"),
		Mode:                    "iptables",
		StateDir:                "/var/lib/switchyard-agent",
		HealthzBindAddress:      "0.0.0.0:10256",
		KubeProxyHealthzAddress: peer.DefaultHealthzAddress,
		MetricsBindAddress:      "127.0.0.1:10249",
		MinSyncPeriod:           Duration{time.Second},
		SyncPacing:              "adaptive",
		SyncPeriod:              Duration{time.Hour},
		DriftCheckInterval:      Duration{5 * time.Second},
		// One reconcile of 100k UDP entries lists them in ~0.4 s of
		// one core (BENCHMARKS.md): a minute costs under 1%.
		ConntrackReconcileInterval: Duration{time.Minute},
		// Not kube-proxy's 10249/10256, nor 10257-10259 (controller
		// manager, cloud controller manager, scheduler), nor the control
		// plane's 10262/10263.
		DatapathCanaryPort:    10264,
		DatapathProbeInterval: Duration{2 * time.Second},
		LogLevel:              "info",
		LogFormat:             "text",
		GCPercent:             50,
	}
}

// addresses is a repeatable, comma-separated flag. The first Set on the
// command line replaces what the config file said.
type addresses struct {
	list *[]string
	set  bool
}

func (a *addresses) String() string {
	if a.list == nil {
		return ""
	}
	return strings.Join(*a.list, ",")
}

func (a *addresses) Set(v string) error {
	if !a.set {
		*a.list, a.set = nil, true
	}
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*a.list = append(*a.list, s)
		}
	}
	return nil
}

func bind(fs *flag.FlagSet, c *Config, configFile *string) {
	fs.StringVar(configFile, "config", "", "YAML file with the same fields as these flags (controlPlanes, nodeName, mode, stateDir, healthzBindAddress, metricsBindAddress, healthCheckBindAddress, caFile, certFile, keyFile, insecure, minSyncPeriod, syncPacing, syncPeriod, driftCheckInterval, conntrackReconcileInterval, datapathCanary, datapathCanaryPort, datapathProbeInterval, logLevel, logFormat, cleanupKubeProxy, gcPercent, enableProfiling); flags override it")
	fs.Var(&addresses{list: &c.ControlPlanes}, "control-plane", "control-plane gRPC address host:port; repeat the flag or separate with commas; the agent fails over between them. "+
		"The agent dials first the replica addresses the control plane advertised (NodeConfig control_plane_addresses, persisted in --state-dir/control-planes.json), then these; "+
		"at least one of these must work without a Service VIP on a fresh node. With TLS, learnt addresses are verified against the host of the first of these")
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "name of this Kubernetes node (default $NODE_NAME, as the DaemonSet's downward API sets it)")
	fs.StringVar(&c.Mode, "mode", c.Mode, "dataplane mode: iptables|ipvs|nftables|userspace|dry-run; a NodeConfig from the control plane overrides it")
	fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "directory where the last applied view (view.pb and changes.log, which also records the update being committed) and the learnt control-plane addresses (control-planes.json) are persisted and restored from on start; a view.pb that is empty, another node's, from an older format or damaged is rejected and the kernel adopted as found")
	fs.StringVar(&c.HealthzBindAddress, "healthz-bind-address", c.HealthzBindAddress, "address for /healthz and /livez; empty disables")
	fs.StringVar(&c.MetricsBindAddress, "metrics-bind-address", c.MetricsBindAddress, "address for /metrics; empty disables")
	fs.StringVar(&c.HealthCheckBindAddress, "health-check-bind-address", c.HealthCheckBindAddress, "IP the load-balancer health-check node ports listen on; empty means all addresses")
	fs.StringVar(&c.CAFile, "ca-file", c.CAFile, "PEM CA bundle that verifies the control plane's certificate; reloaded when it changes")
	fs.StringVar(&c.CertFile, "cert-file", c.CertFile, "PEM client certificate naming this node (mTLS); reloaded when it changes (the kubelet's rotation), and the stream reconnects once to present it")
	fs.StringVar(&c.KeyFile, "key-file", c.KeyFile, "PEM private key of --cert-file")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "talk plaintext gRPC to the control plane; only when no TLS file is given (tests and demos)")
	fs.DurationVar(&c.MinSyncPeriod.Duration, "min-sync-period", c.MinSyncPeriod.Duration,
		"with --sync-pacing=bounded, the shortest time between two syncs (kube-proxy's); with adaptive, the longest a change waits for a sync; bursts of changes are coalesced either way")
	fs.StringVar(&c.SyncPacing, "sync-pacing", c.SyncPacing,
		"how syncs that follow each other are spaced: adaptive (a sync waits 4 times the previous sync's duration, at most --min-sync-period: an idle node applies a change at once, a burst is coalesced, a slow mode is paced as bounded) or bounded (kube-proxy's: --min-sync-period between syncs, whatever they cost)")
	fs.DurationVar(&c.DriftCheckInterval.Duration, "drift-check-interval", c.DriftCheckInterval.Duration,
		"time between checks that the kernel still holds what the agent applied (a generation number, read back only when something changed); a difference is repaired at once by a full sync that writes only it. 0 disables")
	fs.DurationVar(&c.ConntrackReconcileInterval.Duration, "conntrack-reconcile-interval", c.ConntrackReconcileInterval.Duration,
		"time between reconciles of the node's UDP conntrack table with the applied Services (iptables, nftables and ipvs modes; userspace does no DNAT): entries DNATed to an address:port that is no endpoint of the service port they name (endpoint gone, scaled to zero, a deleted Service's cluster IP) or cached un-NATed while the port had no endpoints and it has some now are deleted; TCP and addresses that are not a service's or a node port's are never touched. "+
			"The agent also reconciles after its first sync, after each full sync and after each sync that removed a UDP endpoint or Service. 0 disables the reconciler (the per-sync cleanup of what a change left stays)")
	fs.StringVar(&c.DatapathCanary, "datapath-canary", c.DatapathCanary,
		"cluster IP:port ([IPv6]:port) of the datapath canary, a Service the agent programs itself with one endpoint, this node's address on --datapath-canary-port, and connects to from the node every --datapath-probe-interval: /healthz and the load-balancer health-check node ports fail while that connection does not reach the agent through the programmed rules. "+
			"Choose an address inside the Service range and reserve it with a selector-less Service switchyard-system/switchyard-datapath-canary of that cluster IP; while another Service has it, or the control plane's Service ranges do not hold it, the canary is not programmed. Empty disables")
	fs.IntVar(&c.DatapathCanaryPort, "datapath-canary-port", c.DatapathCanaryPort, "port the datapath canary answers on, on the node's own address (its first NodeConfig address of the canary's family): the canary Service's endpoint")
	fs.DurationVar(&c.DatapathProbeInterval.Duration, "datapath-probe-interval", c.DatapathProbeInterval.Duration,
		"time between probes of the datapath canary; 2 failed in a row make /healthz 503, one success 200 again. 0 disables the canary")
	fs.DurationVar(&c.SyncPeriod.Duration, "sync-period", c.SyncPeriod.Duration, "time between full resyncs that read the kernel back and repair drift (kube-proxy does its full sync hourly too); changes are applied as they arrive, not on this period")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "log level: debug|info|warn|error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "log format: text|json")
	fs.BoolVar(&c.EnableProfiling, "profiling", c.EnableProfiling, "serve Go's profiles (net/http/pprof) under /debug/pprof/ on the metrics address, as kube-proxy's --profiling does")
	fs.IntVar(&c.GCPercent, "gc-percent", c.GCPercent, "Go garbage-collection target (GOGC) of the agent: below Go's default 100 the resident set every node pays stays smaller (1k services: 29 vs 31 MiB) for a little GC CPU on a heap of a few MB; the GOGC environment variable, when set, wins")
	fs.BoolVar(&c.CleanupKubeProxy, "cleanup-kube-proxy", c.CleanupKubeProxy, "hand the node over with kube-proxy, both ways: while kube-proxy runs (--kube-proxy-healthz-address answers at start, or its rules reappear) write no rule and, once it is healthy, remove this agent's; once it stopped, program the node, then remove what kube-proxy left (its iptables chains, nftables tables, kube-ipvs0 and IPVS services, ipsets); does nothing where kube-proxy left nothing. With --cleanup, remove kube-proxy's too")
	fs.StringVar(&c.KubeProxyHealthzAddress, "kube-proxy-healthz-address", c.KubeProxyHealthzAddress, "where kube-proxy serves /healthz on this node (its --healthz-bind-address port on loopback): while something other than this agent answers, kube-proxy runs (see --cleanup-kube-proxy); empty never finds it running")
	fs.BoolVar(&c.Cleanup, "cleanup", false, "remove everything every Switchyard mode programmed on this node (iptables chains and ipsets, nftables tables, IPVS services and kube-ipvs0; never other software's rules, nor kube-proxy's unless --cleanup-kube-proxy) and the persisted state in --state-dir, then exit: 0 when nothing is left, 1 with the errors otherwise. "+
		"For uninstalling or moving back to kube-proxy; needs no control plane, node name or TLS flags; not settable in --config")
}

// parseConfig builds the configuration: defaults, then the --config file,
// then the flags given.
func parseConfig(args []string, out io.Writer, env func(string) string) (Config, error) {
	// First pass: find --config only.
	var configFile string
	scratch := defaults(env)
	pre := flag.NewFlagSet("switchyard-agent", flag.ContinueOnError)
	pre.SetOutput(io.Discard)
	bind(pre, &scratch, &configFile)
	_ = pre.Parse(args) // errors are reported by the second pass

	c := defaults(env)
	if configFile != "" {
		data, err := os.ReadFile(configFile)
		if err != nil {
			return Config{}, fmt.Errorf("config file: %w", err)
		}
		if err := yaml.UnmarshalStrict(data, &c); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", configFile, err)
		}
	}
	fs := flag.NewFlagSet("switchyard-agent", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Usage: switchyard-agent [flags]\n\nSwitchyard node agent: receives this node's view from the control plane and programs the dataplane.\n\nFlags:")
		fs.PrintDefaults()
	}
	bind(fs, &c, &configFile)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	if c.Cleanup {
		return nil // talks to no control plane
	}
	var errs []error
	if len(c.ControlPlanes) == 0 {
		errs = append(errs, errors.New("--control-plane is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required (or set NODE_NAME)"))
	}
	tls := c.CAFile != "" || c.CertFile != "" || c.KeyFile != ""
	switch {
	case c.Insecure && tls:
		errs = append(errs, errors.New("--insecure cannot be combined with --ca-file, --cert-file or --key-file"))
	case !c.Insecure && c.CAFile == "":
		errs = append(errs, errors.New("--ca-file is required (plaintext only with --insecure)"))
	case (c.CertFile == "") != (c.KeyFile == ""):
		errs = append(errs, errors.New("--cert-file and --key-file go together"))
	}
	if c.SyncPeriod.Duration <= 0 {
		errs = append(errs, errors.New("--sync-period must be positive"))
	}
	if c.DriftCheckInterval.Duration < 0 {
		errs = append(errs, errors.New("--drift-check-interval must not be negative"))
	}
	if _, err := c.datapathCanary(); err != nil {
		errs = append(errs, err)
	}
	if c.DatapathCanaryPort <= 0 || c.DatapathCanaryPort > 65535 {
		errs = append(errs, fmt.Errorf("--datapath-canary-port %d: want 1-65535", c.DatapathCanaryPort))
	}
	if c.ConntrackReconcileInterval.Duration < 0 {
		errs = append(errs, errors.New("--conntrack-reconcile-interval must not be negative"))
	}
	if c.DatapathProbeInterval.Duration < 0 {
		errs = append(errs, errors.New("--datapath-probe-interval must not be negative"))
	}
	if c.MinSyncPeriod.Duration < 0 {
		errs = append(errs, errors.New("--min-sync-period must not be negative"))
	}
	if _, err := syncer.ParsePacing(c.SyncPacing); err != nil {
		errs = append(errs, fmt.Errorf("--sync-pacing: %w", err))
	}
	return errors.Join(errs...)
}

// datapathCanary parses --datapath-canary; the zero AddrPort when empty
// (disabled).
func (c *Config) datapathCanary() (netip.AddrPort, error) {
	if c.DatapathCanary == "" {
		return netip.AddrPort{}, nil
	}
	ap, err := netip.ParseAddrPort(c.DatapathCanary)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("--datapath-canary %q: want IP:PORT ([IPv6]:PORT): %w", c.DatapathCanary, err)
	}
	a := ap.Addr()
	if ap.Port() == 0 || a.Zone() != "" || !a.IsGlobalUnicast() {
		return netip.AddrPort{}, fmt.Errorf("--datapath-canary %q: want a cluster IP of the Service range and a port", c.DatapathCanary)
	}
	return netip.AddrPortFrom(a.Unmap(), ap.Port()), nil
}
