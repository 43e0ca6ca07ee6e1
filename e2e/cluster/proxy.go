package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kinds of service proxy the bed runs.
const (
	// KindSwitchyard is deploy/ applied through an overlay, the agents in
	// one dataplane mode.
	KindSwitchyard = "switchyard"
	// KindKubeProxy is upstream kube-proxy's DaemonSet (InstallKubeProxy).
	KindKubeProxy = "kube-proxy"
)

// proxyModes are the modes each kind has on this bed; the kernel has no
// IPVS, so kube-proxy's ipvs mode is not offered (Switchyard's ipvs mode
// is, and refuses clearly at start).
var proxyModes = map[string][]string{
	KindSwitchyard: {"iptables", "nftables", "userspace", "ipvs"},
	KindKubeProxy:  {KubeProxyIPTables, KubeProxyNFTables},
}

// Proxy is one service proxy the bed can run, named "<kind>-<mode>"
// (switchyard-nftables, kube-proxy-iptables): the names the conformance
// and latency commands take and write in their results.
type Proxy struct {
	Name string
	Kind string
	Mode string
}

// ParseProxy reads "<kind>-<mode>".
func ParseProxy(name string) (Proxy, error) {
	for kind, modes := range proxyModes {
		if mode, ok := strings.CutPrefix(name, kind+"-"); ok {
			if !slices.Contains(modes, mode) {
				return Proxy{}, fmt.Errorf("proxy %q: %s has modes %s", name, kind, strings.Join(modes, ", "))
			}
			return Proxy{Name: name, Kind: kind, Mode: mode}, nil
		}
	}
	return Proxy{}, fmt.Errorf("proxy %q: want %s-<mode> or %s-<mode>", name, KindSwitchyard, KindKubeProxy)
}

// InstallProxy deploys CoreDNS and p (Switchyard through overlay, which
// kube-proxy ignores) and waits until CoreDNS is Ready: it lists Services
// through the kubernetes VIP that only the proxy programs, so a Ready
// CoreDNS is a proxy at work. kube-proxy's image must have been imported
// (BuildKubeProxyImage).
func (c *Cluster) InstallProxy(ctx context.Context, p Proxy, overlay string) error {
	if p.Kind == KindSwitchyard {
		return c.InstallWithDNS(ctx, overlay, p.Mode)
	}
	if err := c.InstallPinnedDNS(ctx); err != nil {
		return err
	}
	if err := c.InstallKubeProxy(ctx, p.Mode); err != nil {
		return err
	}
	return c.WaitDNS(ctx)
}

// UpWithProxy is Up and then InstallProxy (at most 6 minutes), for
// harnesses that measure one proxy per fresh bed; a bed whose install
// fails is torn down. kubeProxyImage is kube-proxy's archive
// (BuildKubeProxyImage), imported only when p is kube-proxy.
func UpWithProxy(ctx context.Context, cfg Config, p Proxy, overlay, kubeProxyImage string) (*Cluster, error) {
	cfg.Images = slices.Clone(cfg.Images)
	if p.Kind == KindKubeProxy {
		cfg.Images = append(cfg.Images, kubeProxyImage)
	}
	c, err := Up(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ictx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	if err := c.InstallProxy(ictx, p, overlay); err != nil {
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer dcancel()
		return nil, errors.Join(fmt.Errorf("install %s: %w", p.Name, err), c.Down(dctx))
	}
	return c, nil
}
