package cluster

import (
	"context"
	_ "embed"
	"strings"
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
	return c.applyManifest(ctx, "coredns", m)
}
