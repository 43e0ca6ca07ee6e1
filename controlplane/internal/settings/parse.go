package settings

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Key is the ConfigMap data key that holds the settings.
const Key = "config.yaml"

// File is config.yaml. Every field is optional: a field present
// overrides the flag of the same name, an absent one leaves the flag's
// value. Durations are Go durations ("1s", "1h"); lists are YAML lists.
type File struct {
	Mode              *string   `json:"mode,omitempty"`
	MinSyncPeriod     *string   `json:"minSyncPeriod,omitempty"`
	SyncPeriod        *string   `json:"syncPeriod,omitempty"`
	IPVSScheduler     *string   `json:"ipvsScheduler,omitempty"`
	ClusterCIDRs      *[]string `json:"clusterCIDRs,omitempty"`
	MasqueradeAll     *bool     `json:"masqueradeAll,omitempty"`
	NodePortAddresses *[]string `json:"nodePortAddresses,omitempty"`
	// FlowtableInterfaces are interface name patterns (path.Match) whose
	// established Service flows the nftables mode offloads; empty: none.
	FlowtableInterfaces *[]string `json:"flowtableInterfaces,omitempty"`
	// LoadBalancing is the algorithm of services without a
	// switchyard.io/load-balancing annotation. Cluster-wide only: it
	// shapes service views, which every node must share (a rollout
	// refuses it).
	LoadBalancing *string `json:"loadBalancing,omitempty"`
	// Rollout brings other settings to the fleet a step at a time.
	Rollout *RolloutFile `json:"rollout,omitempty"`
}

// RolloutFile is config.yaml's rollout.
type RolloutFile struct {
	// Name identifies the rollout (a DNS-1123 label): a new name starts
	// over, with a new sample of nodes per step.
	Name string `json:"name"`
	// Settings are the fields the rollout changes, as at the top level
	// (no rollout inside).
	Settings *File `json:"settings"`
	// CanaryNodes go first, with the nodes labelled
	// switchyard.io/rollout-canary=true.
	CanaryNodes []string `json:"canaryNodes,omitempty"`
	// Steps are the shares of all nodes after the canaries ("10%",
	// "50%"); 100% ends them. Empty is ["100%"].
	Steps []string `json:"steps,omitempty"`
	// Pause is how long a step's nodes must be applied and healthy before
	// the next; default 30s.
	Pause *string `json:"pause,omitempty"`
}

// ParseFile is Parse that also returns config.yaml's rollout, nil when
// it has none: its target settings are the file's with the rollout's over
// them.
func ParseFile(data []byte, base nodeview.Defaults) (nodeview.Defaults, *rollout.Spec, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return base, nil, fmt.Errorf("%s: %w", Key, err)
	}
	d, err := f.over(base)
	if err != nil {
		return base, nil, fmt.Errorf("%s: %w", Key, err)
	}
	if f.Rollout == nil {
		return d, nil, nil
	}
	spec, err := f.Rollout.spec(d)
	if err != nil {
		return base, nil, fmt.Errorf("%s: rollout: %w", Key, err)
	}
	return d, spec, nil
}

func (r *RolloutFile) spec(d nodeview.Defaults) (*rollout.Spec, error) {
	if msgs := validation.IsDNS1123Label(r.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("name %q: %s", r.Name, strings.Join(msgs, "; "))
	}
	if r.Settings == nil {
		return nil, errors.New("settings: missing (what would it roll out?)")
	}
	if r.Settings.Rollout != nil {
		return nil, errors.New("settings: a rollout inside a rollout")
	}
	if r.Settings.LoadBalancing != nil {
		return nil, errors.New("settings: loadBalancing is cluster-wide (every node must hash a flow alike): set it at the top level")
	}
	target, err := r.Settings.over(d)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	percents, err := rollout.ParseSteps(r.Steps)
	if err != nil {
		return nil, err
	}
	pause := rollout.DefaultPause
	if r.Pause != nil {
		if pause, err = parsePeriod(*r.Pause); err != nil {
			return nil, fmt.Errorf("pause: %w", err)
		}
	}
	for _, n := range r.CanaryNodes {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			return nil, fmt.Errorf("canaryNodes: %q: %s", n, strings.Join(msgs, "; "))
		}
	}
	return &rollout.Spec{Name: r.Name, Target: target, CanaryNodes: slices.Clone(r.CanaryNodes), Percents: percents, Pause: pause}, nil
}

// Parse reads config.yaml strictly (an unknown field is an error: a typo
// must not silently leave a flag in force) and returns base with the
// file's fields over it. Every value is checked as its flag is.
func Parse(data []byte, base nodeview.Defaults) (nodeview.Defaults, error) {
	d, _, err := ParseFile(data, base)
	return d, err
}

func (f File) over(d nodeview.Defaults) (nodeview.Defaults, error) {
	var errs []error
	set := func(field string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
		}
	}
	var err error
	if f.Mode != nil {
		d.Mode, err = ParseMode(*f.Mode)
		set("mode", err)
	}
	if f.MinSyncPeriod != nil {
		d.MinSyncPeriod, err = parsePeriod(*f.MinSyncPeriod)
		set("minSyncPeriod", err)
	}
	if f.SyncPeriod != nil {
		d.SyncPeriod, err = parsePeriod(*f.SyncPeriod)
		set("syncPeriod", err)
	}
	if f.IPVSScheduler != nil {
		d.IPVSScheduler = *f.IPVSScheduler
		set("ipvsScheduler", CheckScheduler(d.IPVSScheduler))
	}
	if f.ClusterCIDRs != nil {
		d.ClusterCIDRs, err = ParseCIDRs(*f.ClusterCIDRs)
		set("clusterCIDRs", err)
	}
	if f.MasqueradeAll != nil {
		d.MasqueradeAll = *f.MasqueradeAll
	}
	if f.NodePortAddresses != nil {
		d.NodePortAddresses, err = ParseNodePortAddresses(*f.NodePortAddresses)
		set("nodePortAddresses", err)
	}
	if f.FlowtableInterfaces != nil {
		d.FlowtableInterfaces, err = ParseFlowtableInterfaces(*f.FlowtableInterfaces)
		set("flowtableInterfaces", err)
	}
	if f.LoadBalancing != nil {
		d.LoadBalancing = *f.LoadBalancing
		set("loadBalancing", CheckLoadBalancing(d.LoadBalancing))
	}
	return d, errors.Join(errs...)
}

func parsePeriod(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("%s is negative", s)
	}
	return d, nil
}

// modes are the dataplane modes by name; "" leaves each agent's --mode.
var modes = map[string]switchyardv1.DataplaneMode{
	"":          switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED,
	"iptables":  switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES,
	"ipvs":      switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
	"nftables":  switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES,
	"userspace": switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE,
	"dry-run":   switchyardv1.DataplaneMode_DATAPLANE_MODE_DRY_RUN,
}

// ParseMode reads a dataplane mode name; empty is UNSPECIFIED.
func ParseMode(s string) (switchyardv1.DataplaneMode, error) {
	if m, ok := modes[s]; ok {
		return m, nil
	}
	return 0, fmt.Errorf("%q: want iptables, ipvs, nftables, userspace or dry-run", s)
}

// CheckScheduler accepts the IPVS schedulers agents program: kube-proxy's
// ipvsScheduler values and mh (Maglev hashing); empty is rr.
func CheckScheduler(s string) error {
	switch s {
	case "", "rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh":
		return nil
	}
	return fmt.Errorf("%q: want rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq or mh", s)
}

// CheckLoadBalancing accepts an algorithm name (random, round-robin,
// maglev, source-hash); empty leaves each mode its default.
func CheckLoadBalancing(s string) error {
	if s == "" {
		return nil
	}
	_, err := serviceport.ParseLoadBalancing(s)
	return err
}

// ParseCIDRs reads pod CIDRs, masked; empty entries are skipped.
func ParseCIDRs(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range list {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// nodePortLoopback are the loopback ranges, which never serve node ports.
var nodePortLoopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseNodePortAddresses reads a node port address list as kube-proxy
// validates its --nodeport-addresses: CIDRs and the keywords "primary"
// and "all", each keyword once. CIDRs come back in canonical form (host
// bits cleared), each once. Loopback ("localhost", or a CIDR inside a
// loopback range) is refused: loopback node ports need route_localnet,
// which Switchyard never sets, so they could not answer.
func ParseNodePortAddresses(list []string) ([]string, error) {
	var out []string
	for _, f := range list {
		f = strings.TrimSpace(f)
		switch f {
		case "":
			continue
		case "primary", "all":
			if slices.Contains(out, f) {
				return nil, fmt.Errorf("%q given twice", f)
			}
			out = append(out, f)
			continue
		case "localhost":
			return nil, fmt.Errorf("%q: loopback node ports need route_localnet, which Switchyard never sets", f)
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%q: want a CIDR, primary or all: %w", f, err)
		}
		p = p.Masked()
		for _, lo := range nodePortLoopback {
			if lo.Bits() <= p.Bits() && lo.Contains(p.Addr()) {
				return nil, fmt.Errorf("%s is loopback: loopback node ports need route_localnet, which Switchyard never sets", p)
			}
		}
		if !slices.Contains(out, p.String()) {
			out = append(out, p.String())
		}
	}
	return out, nil
}

// maxInterfaceName is the longest interface name Linux accepts
// (IFNAMSIZ - 1).
const maxInterfaceName = 15

// ParseFlowtableInterfaces reads interface name patterns for the
// flowtable fast path: each a pattern of Go's path.Match ("eth*",
// "veth*", "ens[0-9]"), which is what agents match link names with, of
// at most 15 characters (a longer one could match no interface), each
// once, in the order given; empty entries are skipped. Patterns rather
// than KEP-4963's CEL expression over the interface's name, type and
// alias: names are what operators and CNIs choose (a CNI's veth prefix,
// the uplinks), they check here with no expression engine in either
// tier, and an agent matches them without reading more than the names.
func ParseFlowtableInterfaces(list []string) ([]string, error) {
	var out []string
	for _, f := range list {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if len(f) > maxInterfaceName && !strings.ContainsAny(f, "*?[\\") {
			return nil, fmt.Errorf("%q: longer than an interface name (%d characters)", f, maxInterfaceName)
		}
		if strings.ContainsAny(f, "/ ") {
			return nil, fmt.Errorf("%q: an interface name pattern has no '/' or space", f)
		}
		if _, err := path.Match(f, ""); err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}
