package dryrun

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/internal/sorted"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

var _ dataplane.Dataplane = (*Dataplane)(nil)

// Dataplane prints each Apply to a writer.
type Dataplane struct {
	mu sync.Mutex
	w  io.Writer
}

// New returns a dry-run dataplane printing to w.
func New(w io.Writer) *Dataplane { return &Dataplane{w: w} }

// Mode implements dataplane.Dataplane.
func (d *Dataplane) Mode() string { return "dry-run" }

// Apply implements dataplane.Dataplane: it prints st.
func (d *Dataplane) Apply(ctx context.Context, st *dataplane.State, opts dataplane.ApplyOptions) error {
	return d.print(ctx, "apply", func() string { return Render(st, opts) })
}

// Cleanup implements dataplane.Dataplane: it prints that it would clean up.
func (d *Dataplane) Cleanup(ctx context.Context) error {
	return d.print(ctx, "cleanup", func() string { return "cleanup\n" })
}

// print writes what op does, unless ctx has ended. The text is built
// outside the lock; only the write is serialized, so concurrent calls
// never interleave their lines.
func (d *Dataplane) print(ctx context.Context, op string, text func() string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dry-run %s: %w", op, err)
	}
	s := text()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := io.WriteString(d.w, s); err != nil {
		return fmt.Errorf("dry-run %s: %w", op, err)
	}
	return nil
}

// Render returns the text Apply prints for st. It does no I/O.
func Render(st *dataplane.State, opts dataplane.ApplyOptions) string {
	var b strings.Builder
	names := sorted.Keys(st.Services)
	fmt.Fprintf(&b, "apply full=%t services=%d\n", opts.Full, len(names))
	if c := st.Config; c != nil {
		fmt.Fprintf(&b, "config node=%s zone=%s mode=%s masqueradeAll=%t clusterCIDRs=%s nodeIPs=%s",
			c.GetNodeName(), c.GetZone(), cmp.Or(dataplane.ModeName(c.GetMode()), "unspecified"), c.GetMasqueradeAll(),
			strings.Join(c.GetClusterCidrs(), ","), strings.Join(c.GetNodeIps(), ","))
		// Only when set, so configs without them print as they did.
		if l := c.GetNodePortAddresses(); len(l) > 0 {
			fmt.Fprintf(&b, " nodePortAddresses=%s", strings.Join(l, ","))
		}
		if l := c.GetServiceCidrs(); len(l) > 0 {
			fmt.Fprintf(&b, " serviceCIDRs=%s", strings.Join(l, ","))
		}
		b.WriteByte('\n')
	}
	for _, name := range names {
		renderService(&b, name, st.Services[name])
	}
	return b.String()
}

func renderService(b *strings.Builder, name string, sv *switchyardv1.ServiceView) {
	fmt.Fprintf(b, "service %s type=%s clusterIPs=%s externalIPs=%s lbIPs=%s affinity=%s/%ds etp=%s itp=%s hcNodePort=%d hasEndpoints=%t\n",
		name, trim(sv.GetType().String(), "SERVICE_TYPE_"),
		list(sv.GetClusterIps()), list(sv.GetExternalIps()), list(sv.GetLoadBalancerIps()),
		trim(sv.GetSessionAffinity().String(), "SESSION_AFFINITY_"), sv.GetSessionAffinityTimeoutSeconds(),
		trim(sv.GetExternalTrafficPolicy().String(), "TRAFFIC_POLICY_"),
		trim(sv.GetInternalTrafficPolicy().String(), "TRAFFIC_POLICY_"),
		sv.GetHealthCheckNodePort(), sv.GetHasAnyEndpoints())
	for _, p := range sv.GetPorts() {
		// hasEndpoints only when the control plane decided it per port
		// (an older one does not), so old views print as they did.
		has := ""
		if p.HasAnyEndpoints != nil {
			has = fmt.Sprintf(" hasEndpoints=%t", p.GetHasAnyEndpoints())
		}
		fmt.Fprintf(b, "  port %s %s/%d nodePort=%d%s\n", portName(p.GetName()),
			trim(p.GetProtocol().String(), "PROTOCOL_"), p.GetPort(), p.GetNodePort(), has)
	}
	renderEndpoints(b, "cluster", sv.GetClusterEndpoints())
	renderEndpoints(b, "local", sv.GetLocalEndpoints())
}

func renderEndpoints(b *strings.Builder, set string, eps []*switchyardv1.Endpoint) {
	lines := make([]string, 0, len(eps))
	for _, ep := range eps {
		ports := make([]string, 0, len(ep.GetPorts()))
		for _, p := range ep.GetPorts() {
			ports = append(ports, fmt.Sprintf("%s:%d", portName(p.GetName()), p.GetPort()))
		}
		lines = append(lines, fmt.Sprintf("  endpoint %s %s ports=%s ready=%t serving=%t terminating=%t local=%t\n",
			set, ep.GetAddress(), list(ports), ep.GetReady(), ep.GetServing(), ep.GetTerminating(), ep.GetIsLocal()))
	}
	sort.Strings(lines)
	for _, l := range lines {
		b.WriteString(l)
	}
}

func trim(s, prefix string) string { return strings.TrimPrefix(s, prefix) }

func portName(n string) string {
	if n == "" {
		return "-"
	}
	return n
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ",")
}
