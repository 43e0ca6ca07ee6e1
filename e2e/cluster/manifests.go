package cluster

import (
	"context"
	_ "embed"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
)

//go:embed manifests/bootstrap-rbac.yaml
var bootstrapRBAC string

//go:embed manifests/coredns.yaml
var corednsManifest string

// InstallDNS deploys CoreDNS (image) as kube-dns at DNSVIP. Its pods become
// Ready only once a service proxy programs the kubernetes VIP they list
// Services through.
func (c *Cluster) InstallDNS(ctx context.Context, image string) error {
	m := strings.NewReplacer("{{COREDNS_IMAGE}}", image, "{{DNS_VIP}}", DNSVIP.String()).Replace(corednsManifest)
	return c.Apply(ctx, "coredns", m)
}

// InstallPinnedDNS is InstallDNS with hack/versions.env's COREDNS_VERSION.
func (c *Cluster) InstallPinnedDNS(ctx context.Context) error {
	v, err := PinnedVersion("COREDNS_VERSION")
	if err != nil {
		return err
	}
	return c.InstallDNS(ctx, images.CoreDNSRef(v))
}

// WaitDNS waits until CoreDNS is rolled out with every pod Ready.
func (c *Cluster) WaitDNS(ctx context.Context) error {
	_, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "deployment/coredns", "--timeout=3m")
	return err
}
