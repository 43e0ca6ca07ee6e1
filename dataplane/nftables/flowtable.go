package nftables

import (
	"context"
	"path"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
)

// The flowtable fast path (NodeConfig.flowtable_interfaces, KEP-4963):
// a flowtable in the mode's table whose devices are the node's
// interfaces matching the patterns, and a forward-hook rule that adds
// to it the established TCP flows Switchyard DNATed. Once a flow is in
// the flowtable its packets are forwarded from the ingress hook of
// those devices, past conntrack, the routing decision and every other
// hook; see README.md "Flowtable fast path" for what that changes.
//
// Two transactions, so the fast path never fails service programming:
// the main one (full or partial) declares the flowtable without devices
// and the rule; a second one adds the devices the flowtable lacks (an
// interface can vanish between the listing and the commit, and nft then
// refuses the whole transaction). A failure of the second is logged and
// counted (SyncStats.FlowtableErrors) and retried at the next sync.
// Devices are only ever added by a partial sync: the kernel drops an
// interface that goes away from the flowtable by itself, and one that
// stays but no longer matches (the patterns changed) makes the sync
// full, whose transaction recreates the flowtable empty.
//
// A kernel without flowtables (CONFIG_NF_FLOW_TABLE unset) refuses the
// flowtable: the mode probes it with "nft --check" before first using
// it, and on refusal renders without it (SyncStats.FlowtableSkipped,
// a warning once) and probes again at each full sync.

const (
	// flowtableName is the flowtable of the mode's table.
	flowtableName = "fastpath"
	// chainFlowOffload holds the offload rule. A base chain of its own,
	// present only with the setting, at priority filter + 10: a forward
	// chain at filter priority (iptables-nft's FORWARD, a network policy
	// implementation) sees every packet of a flow before it is
	// offloaded, and a flow such a chain drops never reaches the rule.
	chainFlowOffload = "flowtable-forward"
	prioFlowOffload  = knftables.BaseChainPriority("10")
	// flowOffloadRule offloads TCP only. UDP is left out on purpose:
	// the stale-UDP cleanup moves a flow off a removed endpoint by
	// deleting its conntrack entry, and kernels before upstream
	// 9b7c68b3911a (6.4; Debian backported it to 6.1) refuse to delete
	// an offloaded entry (EBUSY; a filtered flush skips it), so there
	// the flow would keep going to the removed endpoint for as long as
	// packets keep coming (the flowtable's UDP timeout is an idle one).
	// Where the kernel deletes it, the flowtable ignores the dying entry
	// at once (e2e TestFlowtableOffloadedUDPDeleted). "ct status dnat"
	// keeps to translated flows (Service traffic, never plain
	// pod-to-pod routing), "ct state established" to flows that passed
	// every filter once in each direction.
	flowOffloadRule = "meta l4proto tcp ct state established ct status dnat flow add @" + flowtableName
)

// flowPatterns are the interface patterns of st's NodeConfig.
func flowPatterns(st *dataplane.State) []string {
	if st == nil || st.Config == nil {
		return nil
	}
	return st.Config.GetFlowtableInterfaces()
}

// flowDevices returns the links matching any pattern (path.Match),
// sorted, each once; loopback never (nothing is forwarded from it), nor
// a name nft could not take even quoted.
func flowDevices(patterns, links []string) []string {
	var out []string
	for _, l := range links {
		if l == "" || l == "lo" || strings.ContainsAny(l, "\"\\") {
			continue
		}
		for _, p := range patterns {
			if ok, err := path.Match(p, l); err == nil && ok {
				out = append(out, l)
				break
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// flowtable declares the flowtable and its chain when the renderer was
// told to (r.flow).
func (r *renderer) flowtable() {
	if !r.flow {
		return
	}
	r.rs.Flowtable = flowtableName
	c := r.rs.chain(chainFlowOffload)
	c.Type, c.Hook, c.Priority = knftables.FilterType, knftables.ForwardHook, prioFlowOffload
	c.Rules = append(c.Rules, textRule(flowOffloadRule))
}

// flowtableObject is the flowtable with devs (none: only the hook).
// Names are quoted: nft reads an unquoted "eth0.100" or "lxc-1" as an
// expression, not a name.
func flowtableObject(devs []string) *knftables.Flowtable {
	quoted := make([]string, len(devs))
	for i, d := range devs {
		quoted[i] = `"` + d + `"`
	}
	if len(devs) == 0 {
		quoted = nil
	}
	return &knftables.Flowtable{Name: flowtableName, Priority: knftables.PtrTo(knftables.FilterIngressPriority), Devices: quoted}
}

// flowWanted says whether Apply renders the flowtable for fam: the
// setting is on and the kernel has flowtables, probed once (and again
// at each full sync after a refusal).
func (d *Dataplane) flowWanted(ctx context.Context, st *dataplane.State, fam dataplane.Family, full bool) bool {
	if len(flowPatterns(st)) == 0 {
		return false
	}
	reason, probed := d.flowUnsupported[fam]
	if probed && (reason == "" || !full) {
		if reason != "" {
			d.stats.FlowtableSkipped = true
		}
		return reason == ""
	}
	tx := d.nft[fam].NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(flowtableObject(nil))
	err := d.nft[fam].Check(ctx, tx)
	if err == nil {
		if reason != "" {
			d.log.Info("the kernel has flowtables now: the fast path is on", "family", fam.String())
		}
		d.flowUnsupported[fam] = ""
		return true
	}
	reason = firstLine(err.Error())
	if !probed {
		d.log.Warn("the kernel refuses a flowtable: the fast path is skipped, forwarding goes on without it",
			"family", fam.String(), "err", reason)
	}
	d.flowUnsupported[fam] = reason
	d.stats.FlowtableSkipped = true
	return false
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// flowStale reports whether the kernel's flowtable may hold a device
// that is still there but no longer wanted: only a full sync's
// recreation removes one.
func (d *Dataplane) flowStale(fam dataplane.Family, want []string, links []string) bool {
	for dev := range d.flowDev[fam] {
		if !slices.Contains(want, dev) && slices.Contains(links, dev) {
			return true
		}
	}
	return false
}

// syncFlowDevices adds, in a transaction of its own, the wanted devices
// the flowtable lacks, after the main transaction committed. recreated:
// that transaction created the flowtable anew (empty).
func (d *Dataplane) syncFlowDevices(ctx context.Context, fam dataplane.Family, rs *Ruleset, want, links []string, recreated bool) {
	if rs.Flowtable == "" {
		delete(d.flowDev, fam)
		return
	}
	have := d.flowDev[fam]
	if recreated || have == nil {
		have = map[string]bool{}
	}
	// The kernel dropped the devices that went away.
	for dev := range have {
		if !slices.Contains(links, dev) {
			delete(have, dev)
		}
	}
	d.flowDev[fam] = have
	var add []string
	for _, dev := range want {
		if !have[dev] {
			add = append(add, dev)
		}
	}
	d.stats.FlowtableDevices = len(have)
	if len(add) == 0 {
		return
	}
	tx := d.nft[fam].NewTransaction()
	tx.Add(flowtableObject(add))
	if err := d.run(ctx, fam, tx); err != nil {
		// An interface gone since the listing: the link watch brings the
		// next sync, which retries with what is there then.
		d.stats.FlowtableErrors++
		d.log.Warn("adding interfaces to the flowtable failed; retried at the next sync", "family", fam.String(),
			"devices", strings.Join(add, ","), "err", firstLine(err.Error()))
		return
	}
	for _, dev := range add {
		have[dev] = true
	}
	d.stats.FlowtableDevices = len(have)
}

// FlowtableDevices returns the devices the last Apply left in each
// family's flowtable, sorted; none without one.
func (d *Dataplane) FlowtableDevices() map[dataplane.Family][]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[dataplane.Family][]string{}
	for fam, devs := range d.flowDev {
		out[fam] = sorted.Keys(devs)
	}
	return out
}
