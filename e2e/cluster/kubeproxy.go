package cluster

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Upstream kube-proxy's modes on the bed (the kernel has no IPVS).
const (
	KubeProxyIPTables = "iptables"
	KubeProxyNFTables = "nftables"
)

//go:embed manifests/kube-proxy.yaml
var kubeProxyManifest string

// BuildKubeProxyImage builds (or takes from the cache) upstream kube-proxy's
// image, registry.k8s.io/kube-proxy:<K8S_VERSION>: the agent's rootfs plus
// the test-bed kube-proxy (BUILD_KUBE_PROXY=1 hack/testbed-build.sh). It is
// not part of BuildImages, so a bed that runs only Switchyard never needs
// kube-proxy built; without it the error satisfies images.IsNotBuilt.
// Pass the archive in Config.Images.
func BuildKubeProxyImage(ctx context.Context, cfg Config) (images.Archive, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return images.Archive{}, err
	}
	root, err := apiserver.RepoRoot()
	if err != nil {
		return images.Archive{}, err
	}
	archives, err := images.Build(ctx, images.Options{RepoRoot: root, BinDir: cfg.BinDir, Tag: ImageTag,
		Only: []string{images.KubeProxy}, Logger: cfg.Logger})
	if err != nil {
		return images.Archive{}, err
	}
	if len(archives) != 1 {
		return images.Archive{}, fmt.Errorf("kube-proxy image: Build returned %d archives", len(archives))
	}
	return archives[0], nil
}

// InstallKubeProxy runs upstream kube-proxy in mode (KubeProxyIPTables or
// KubeProxyNFTables) as the DaemonSet kube-system/kube-proxy and waits for
// its rollout. The image must have been imported (BuildKubeProxyImage).
// kube-proxy reaches the API server on its node address, like Switchyard's
// control plane, and writes no machine-wide sysctl (see the manifest).
func (c *Cluster) InstallKubeProxy(ctx context.Context, mode string) error {
	if mode != KubeProxyIPTables && mode != KubeProxyNFTables {
		return fmt.Errorf("install kube-proxy: mode %q: want %s or %s", mode, KubeProxyIPTables, KubeProxyNFTables)
	}
	version, err := PinnedVersion("K8S_VERSION")
	if err != nil {
		return fmt.Errorf("install kube-proxy: %w", err)
	}
	m := kubeProxyManifestFor(images.KubeProxyRef(version), mode, c.cfg.clusterCIDRs())
	if err := c.Apply(ctx, "kube-proxy-"+mode, m); err != nil {
		return fmt.Errorf("install kube-proxy: %w", err)
	}
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/kube-proxy", "--timeout=5m"); err != nil {
		return fmt.Errorf("install kube-proxy (%s): rollout: %w", mode, err)
	}
	c.log.Info("kube-proxy running", "mode", mode, "image", images.KubeProxyRef(version))
	return nil
}

// kubeProxyManifestFor fills in the manifest's placeholders; clusterCIDRs
// is kube-proxy's clusterCIDR (comma-separated, one per family, on a
// dual-stack bed).
func kubeProxyManifestFor(image, mode, clusterCIDRs string) string {
	return strings.NewReplacer(
		"{{IMAGE}}", image,
		"{{MODE}}", mode,
		"{{CLUSTER_CIDR}}", clusterCIDRs,
		"{{API_HOST}}", APIServerIP.String(),
		"{{API_PORT}}", strconv.Itoa(apiServerPort),
	).Replace(kubeProxyManifest)
}
