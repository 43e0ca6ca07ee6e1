package compare

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
)

// Defaults of Config.
const (
	DefaultEndpointsPerService = 5
	DefaultChanges             = 3
	DefaultMinSyncPeriod       = time.Second // kube-proxy's and the agent's default
	DefaultCoalesceWindow      = 100 * time.Millisecond
	DefaultChangeGap           = 2 * time.Second
	DefaultSyncTimeout         = 20 * time.Minute
	DefaultChangeTimeout       = 3 * time.Minute
	DefaultParallel            = 16
)

// kubeProxyBinary is the upstream binary hack/testbed-build.sh builds into
// the test bed's bin dir with BUILD_KUBE_PROXY=1.
const kubeProxyBinary = "kube-proxy"

// ErrNoKubeProxy reports that the upstream kube-proxy binary is not built.
var ErrNoKubeProxy = errors.New("upstream kube-proxy not built")

// KubeProxyHint says how to build the missing binary.
const KubeProxyHint = "run `BUILD_KUBE_PROXY=1 hack/testbed-build.sh` (reuses the cached kube-apiserver module; ~5-10 min cold)"

// KubeProxyPath returns the test bed's kube-proxy binary, or an error
// wrapping ErrNoKubeProxy when it is missing.
func KubeProxyPath() (string, error) {
	dir, err := apiserver.BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, kubeProxyBinary)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("%w: %s missing", ErrNoKubeProxy, path)
	case err != nil:
		return "", err
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%w: %s is not executable", ErrNoKubeProxy, path)
	}
	return path, nil
}

// Config describes a comparison. The zero value measures nothing: set
// Sizes.
type Config struct {
	// Sizes are the numbers of services, one fresh API server each.
	Sizes []int
	// EndpointsPerService (default 5).
	EndpointsPerService int
	// Changes is the number of EndpointSlice changes measured per proxy
	// and size (default 3).
	Changes int
	// KubeProxyModes are the upstream modes to run (default iptables and
	// nftables).
	KubeProxyModes []string
	// SwitchyardModes are the agent's modes to run (default iptables and
	// nftables).
	SwitchyardModes []string
	// MinSyncPeriod is given to both proxies (kube-proxy's
	// --iptables-min-sync-period / --nftables-min-sync-period equivalent
	// and the agent's --min-sync-period); default 1 s, both defaults.
	MinSyncPeriod time.Duration
	// CoalesceWindow is the control plane's --coalesce-window (default
	// 100 ms, its default).
	CoalesceWindow time.Duration
	// ChangeGap is the pause before each change, longer than MinSyncPeriod
	// so that no change waits for the rate limiter (default 2 s).
	ChangeGap time.Duration
	// SyncTimeout bounds a first sync, ChangeTimeout one change.
	SyncTimeout, ChangeTimeout time.Duration
	// Parallel is the number of concurrent create requests (default 16).
	Parallel int
	// Runs is how many times every proxy is measured per size, against
	// the same API server and workload, interleaved (default 1).
	Runs int
	// AgentLogLevel is the agent's --log-level (default info; debug logs
	// every sync with its duration, in the work dir's agent log).
	AgentLogLevel string
	// AgentHeapProfiles, when set, is a directory that gets a heap profile
	// of every agent (agent-<mode>-<services>-run<N>.pb.gz), taken when
	// its RSS is read; the agent then runs with --profiling.
	AgentHeapProfiles string
	// BurnCPUs threads spin beside every proxy while it is measured: a
	// repeatable load (default 0, none).
	BurnCPUs int
	// KubeProxyBinary defaults to KubeProxyPath().
	KubeProxyBinary string
	// ControlPlaneBinary and AgentBinary are built from the workspace
	// when empty.
	ControlPlaneBinary, AgentBinary string
	// WorkDir holds binaries, sockets and logs; default a temp dir that is
	// removed afterwards (kept when the run fails, for its logs).
	WorkDir string
	// Command is recorded in the report.
	Command string
	// Logger receives progress (default: discard).
	Logger *slog.Logger
	// SyncPacing is the agent's --sync-pacing (default adaptive, its
	// default; bounded is kube-proxy's).
	SyncPacing string
	// Churn, when set, adds a steady stream of changes after the timed
	// ones and records each proxy's CPU and syncs under it (churn.go).
	Churn *Churn
	// DataPath, when set, measures traffic through every proxy instead of
	// EndpointSlice changes (datapath.go); it adds the no-proxy baseline
	// and allows Switchyard's userspace mode.
	DataPath *DataPath
}

func (c Config) withDefaults() Config {
	if c.DataPath != nil {
		dp := c.DataPath.withDefaults()
		c.DataPath = &dp
		c.EndpointsPerService = cmp.Or(c.EndpointsPerService, DefaultDataPathEndpoints)
		if c.SwitchyardModes == nil {
			c.SwitchyardModes = []string{"iptables", "nftables", "userspace"}
		}
	}
	c.EndpointsPerService = cmp.Or(c.EndpointsPerService, DefaultEndpointsPerService)
	c.Changes = cmp.Or(c.Changes, DefaultChanges)
	if c.Churn != nil {
		ch := c.Churn.withDefaults()
		c.Churn = &ch
	}
	if c.KubeProxyModes == nil {
		c.KubeProxyModes = []string{"iptables", "nftables"}
	}
	if c.SwitchyardModes == nil {
		c.SwitchyardModes = []string{"iptables", "nftables"}
	}
	c.MinSyncPeriod = cmp.Or(c.MinSyncPeriod, DefaultMinSyncPeriod)
	c.CoalesceWindow = cmp.Or(c.CoalesceWindow, DefaultCoalesceWindow)
	c.ChangeGap = cmp.Or(c.ChangeGap, DefaultChangeGap)
	c.SyncTimeout = cmp.Or(c.SyncTimeout, DefaultSyncTimeout)
	c.ChangeTimeout = cmp.Or(c.ChangeTimeout, DefaultChangeTimeout)
	c.Parallel = cmp.Or(c.Parallel, DefaultParallel)
	c.AgentLogLevel = cmp.Or(c.AgentLogLevel, "info")
	c.Runs = cmp.Or(c.Runs, 1)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validModes checks that proxy's modes are ones both proxies have, or,
// with userspace, also Switchyard's userspace mode (which has no rules to
// compare, only a data path).
func validModes(proxy string, modes []string, userspace bool) error {
	for _, m := range modes {
		if m != "iptables" && m != "nftables" && (m != "userspace" || !userspace) {
			want := "iptables or nftables"
			if userspace {
				want += " or userspace"
			}
			return fmt.Errorf("compare: %s mode %q: want %s", proxy, m, want)
		}
	}
	return nil
}

func (c Config) validate() error {
	if len(c.Sizes) == 0 {
		return errors.New("compare: no sizes")
	}
	if err := validModes("kube-proxy", c.KubeProxyModes, false); err != nil {
		return err
	}
	if err := validModes("switchyard", c.SwitchyardModes, c.DataPath != nil); err != nil {
		return err
	}
	if c.Runs < 0 || c.BurnCPUs < 0 {
		return fmt.Errorf("compare: runs %d and burn CPUs %d must not be negative", c.Runs, c.BurnCPUs)
	}
	if c.ChangeGap <= c.MinSyncPeriod {
		return fmt.Errorf("compare: change gap %v must exceed the min sync period %v", c.ChangeGap, c.MinSyncPeriod)
	}
	return nil
}

func (c Config) settings() Settings {
	return Settings{Sizes: c.Sizes, EndpointsPerService: c.EndpointsPerService, Changes: c.Changes,
		KubeProxyModes: c.KubeProxyModes, SwitchyardModes: c.SwitchyardModes, MinSyncPeriodSeconds: c.MinSyncPeriod.Seconds(),
		CoalesceWindowSeconds: c.CoalesceWindow.Seconds(), ChangeGapSeconds: c.ChangeGap.Seconds(),
		Runs: c.Runs, BurnCPUs: c.BurnCPUs, SyncPacing: cmp.Or(c.SyncPacing, "adaptive"), Churn: c.Churn, DataPath: c.DataPath}
}

// topologySpec is each proxy's throwaway node: one node namespace (plus
// the topology's network, client, control and pod namespaces). The data
// path needs a pod per endpoint, each serving a sink; otherwise one pod
// is enough (the endpoints are addresses no packet is sent to).
func (c Config) topologySpec() netns.Spec {
	s := netns.Spec{Nodes: 1, Prefix: "syc-"}
	if c.DataPath != nil {
		s.PodsPerNode = c.EndpointsPerService
	}
	return s
}
