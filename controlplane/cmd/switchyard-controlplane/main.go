// Command switchyard-controlplane watches Services, EndpointSlices and
// Nodes once, computes every node's view and streams it to the node agents.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/daemon"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "switchyard-controlplane:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	o, logOpts, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, logOpts)
	if err != nil {
		return err
	}
	// client-go logs through klog: route it into the same handler.
	klog.SetSlogLogger(logger)
	o.Logger = logger
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return daemon.Run(ctx, o)
}

type logOptions struct{ level, format string }

func parseFlags(args []string, out io.Writer) (daemon.Options, logOptions, error) {
	var (
		o                   daemon.Options
		lo                  logOptions
		mode, cidrs, adv    string
		nodePorts           string
		flowtable           string
		configMap           string
		caSecret            string
		serverNames         string
		minSync, syncPeriod time.Duration
		fs                  = flag.NewFlagSet("switchyard-controlplane", flag.ContinueOnError)
	)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, "switchyard-controlplane watches Services, EndpointSlices and Nodes once,\n"+
			"computes every node's view and streams it to the node agents over gRPC.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; in-cluster configuration when empty")
	fs.StringVar(&o.Listen, "listen", ":18000", "gRPC address for the discovery and admin services (host:port, or unix:///path for a unix socket)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "127.0.0.1:10263", "HTTP address for /metrics (loopback by default, as kube-proxy's; :10263 for every address); empty disables")
	fs.StringVar(&o.HealthzAddr, "healthz-bind-address", ":10262", "HTTP address for /healthz and /readyz; empty disables")
	fs.DurationVar(&o.CoalesceWindow, "coalesce-window", 100*time.Millisecond, "minimum time between two responses to a node: a change to an idle node goes out at once, later ones within the window are batched")
	fs.IntVar(&o.MaxMessageBytes, "max-message-bytes", 4<<20, "largest gRPC message sent or received; larger batches are split")
	fs.IntVar(&o.MaxUnknownNodeStreams, "max-unknown-node-streams", stream.DefaultMaxStrangers,
		"discovery streams open at once for names that are not Nodes (an agent that connects before the watch saw its Node, or a name nobody runs); more are refused with RESOURCE_EXHAUSTED. Nodes never count; negative refuses every such stream")
	fs.StringVar(&o.TLS.CertFile, "tls-cert-file", "", "PEM server certificate for gRPC; reloaded when it changes (served from the next handshake)")
	fs.StringVar(&o.TLS.KeyFile, "tls-private-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&caSecret, "ca-secret", "", "namespace/name (or name, in POD_NAMESPACE) of a Secret (type kubernetes.io/tls) holding the CA this replica issues its own serving certificate from, in memory, renewed before it expires; "+
		"the first replica creates it with a new CA when absent, the others use that one. Excludes --tls-cert-file; needs get on that Secret and create on Secrets of its namespace")
	fs.StringVar(&o.TLS.CABundle, "ca-bundle-configmap", "", "with --ca-secret: the ConfigMap (in the Secret's namespace) that the CA certificate is published to as ca.crt, for agents' caFile (the CA's key never leaves the Secret)")
	fs.StringVar(&serverNames, "tls-server-names", "", "with --ca-secret: comma-separated DNS names and IP addresses for the issued certificate besides --advertise-service's DNS names (name, name.namespace, name.namespace.svc, name.namespace.svc.cluster.local): "+
		"every address agents dial this replica by, e.g. its node addresses ($(POD_IPS) with hostNetwork) or a load balancer's name")
	fs.StringVar(&o.TLS.ClientCAFile, "client-ca-file", "", "PEM CA bundle for agent certificates: turns on mTLS, and a stream may only subscribe as the node its certificate names; reloaded when it changes")
	fs.StringVar(&o.AdminGroup, "admin-group", "switchyard:admins", "under TLS, AdminService (every node's view) answers only operators: a verified client certificate with this subject Organization, "+
		"or a Kubernetes bearer token whose user may get the gRPC method as a non-resource URL (TokenReview + SubjectAccessReview, e.g. RBAC nonResourceURLs /switchyard.v1.AdminService/*); node certificates are refused. Plaintext (--insecure) leaves it open")
	fs.BoolVar(&o.Insecure, "insecure", false, "serve plaintext gRPC (only when no TLS certificate is given: --ca-secret or --tls-cert-file; for labs, tests and demos)")
	fs.StringVar(&o.ID, "id", "", "name of this replica in responses; the hostname when empty")
	fs.DurationVar(&o.Resync, "resync-period", 0, "informer resync period; 0 disables")
	fs.StringVar(&mode, "mode", "", "dataplane mode every agent must use (iptables|ipvs|nftables|userspace|dry-run); empty leaves each agent's --mode")
	fs.DurationVar(&minSync, "min-sync-period", 0, "agents' minimum time between syncs; 0 leaves the agents' own")
	fs.DurationVar(&syncPeriod, "sync-period", 0, "agents' full resync period; 0 leaves the agents' own")
	fs.StringVar(&o.Views.IPVSScheduler, "ipvs-scheduler", "", "IPVS scheduler for agents in ipvs mode: rr, wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh (empty: rr)")
	fs.StringVar(&o.Views.LoadBalancing, "load-balancing", "", "algorithm of services without a switchyard.io/load-balancing annotation: random, round-robin, maglev (consistent hashing of the client address and port, the same endpoint from every node) "+
		"or source-hash (of the client address); empty leaves each mode its default (random; the ipvs mode's --ipvs-scheduler)")
	fs.StringVar(&cidrs, "cluster-cidr", "", "comma-separated pod CIDRs; service traffic from outside them is masqueraded")
	fs.BoolVar(&o.Views.MasqueradeAll, "masquerade-all", false, "masquerade all service traffic")
	fs.StringVar(&nodePorts, "nodeport-addresses", "", "comma-separated CIDRs and the keywords primary (the node's primary address of each family) and all (every local address): "+
		"node ports answer only on the node's local addresses they cover, as kube-proxy's --nodeport-addresses; a family the list names nothing of answers on all its addresses. "+
		"Loopback never serves node ports (it would need route_localnet, which Switchyard never sets). Empty leaves each agent's mode its kube-proxy default: primary in nftables mode, all in iptables mode; "+
		"in ipvs and userspace modes the list selects among the Node's addresses (all of them by default)")
	fs.StringVar(&flowtable, "flowtable-interfaces", "", "comma-separated interface name patterns (Go path.Match: eth*, veth*, ens[0-9]): agents in nftables mode offload the established TCP flows they DNATed for a Service "+
		"to a netfilter flowtable (KEP-4963's fast path) over the node's interfaces that match, kept in step as interfaces come and go; loopback never. Empty (the default) means no flowtable. "+
		"A kernel without flowtables skips it, counted, and keeps forwarding")
	fs.StringVar(&adv, "advertise-service", "", "namespace/name of the control plane's own Service: the ready endpoints of its EndpointSlices, on the slice port named grpc (or its only TCP port), "+
		"are sent to every agent (NodeConfig control_plane_addresses), which persists them and dials them before its configured addresses, so agents restart without a Service VIP. "+
		"The control plane must run on the host network (endpoints are then node addresses) and the Service must not be headless; empty advertises nothing")
	fs.StringVar(&configMap, "config-map", "", "namespace/name (or name, in the pod's namespace POD_NAMESPACE) of a ConfigMap whose "+settings.Key+" sets the NodeConfig settings every replica sends: "+
		"mode, minSyncPeriod, syncPeriod, ipvsScheduler, clusterCIDRs, masqueradeAll, nodePortAddresses, flowtableInterfaces, loadBalancing. A field it sets overrides the flag of the same name, which is only its default, so replicas agree whatever their flags; "+
		"a ConfigMap that does not parse keeps the settings in use (reported in logs, metrics and ListNodes), an absent one means the flags. Empty reads none")
	fs.StringVar(&lo.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&lo.format, "log-format", "text", "text or json")
	if err := fs.Parse(args); err != nil {
		return o, lo, err
	}
	if fs.NArg() > 0 {
		return o, lo, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	var err error
	if o.Views.Mode, err = settings.ParseMode(mode); err != nil {
		return o, lo, fmt.Errorf("--mode %w", err)
	}
	o.Views.MinSyncPeriod, o.Views.SyncPeriod = minSync, syncPeriod
	if err := settings.CheckScheduler(o.Views.IPVSScheduler); err != nil {
		return o, lo, fmt.Errorf("--ipvs-scheduler %w", err)
	}
	if err := settings.CheckLoadBalancing(o.Views.LoadBalancing); err != nil {
		return o, lo, fmt.Errorf("--load-balancing %w", err)
	}
	if o.Views.ClusterCIDRs, err = settings.ParseCIDRs(list(cidrs)); err != nil {
		return o, lo, fmt.Errorf("--cluster-cidr: %w", err)
	}
	if o.Views.NodePortAddresses, err = settings.ParseNodePortAddresses(list(nodePorts)); err != nil {
		return o, lo, fmt.Errorf("--nodeport-addresses: %w", err)
	}
	if o.Views.FlowtableInterfaces, err = settings.ParseFlowtableInterfaces(list(flowtable)); err != nil {
		return o, lo, fmt.Errorf("--flowtable-interfaces: %w", err)
	}
	if o.ConfigMapNamespace, o.ConfigMapName, err = settings.ParseRef(configMap, os.Getenv("POD_NAMESPACE")); err != nil {
		return o, lo, fmt.Errorf("--config-map %w", err)
	}
	if o.AdvertiseService, err = parseServiceKey(adv); err != nil {
		return o, lo, err
	}
	if o.TLS.CASecretNamespace, o.TLS.CASecret, err = settings.ParseRef(caSecret, os.Getenv("POD_NAMESPACE")); err != nil {
		return o, lo, fmt.Errorf("--ca-secret %w", err)
	}
	o.TLS.ServerNames = list(serverNames)
	return o, lo, nil
}

// parseServiceKey reads "namespace/name"; empty is the zero key.
func parseServiceKey(s string) (model.ServiceKey, error) {
	if s == "" {
		return model.ServiceKey{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok {
		return model.ServiceKey{}, fmt.Errorf("--advertise-service %q: want namespace/name", s)
	}
	for _, part := range []string{ns, name} {
		if msgs := validation.IsDNS1123Label(part); len(msgs) > 0 {
			return model.ServiceKey{}, fmt.Errorf("--advertise-service %q: %q: %s", s, part, strings.Join(msgs, "; "))
		}
	}
	return model.ServiceKey{Namespace: ns, Name: name}, nil
}

// list splits a comma-separated flag value.
func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func newLogger(w io.Writer, o logOptions) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", o.format)
}
