package images

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The images below stand in for upstream e2e images the full
// [sig-network] suite runs. Each keeps what the specs rely on: the
// programs they exec and the ports they expect, on the Debian bookworm
// base upstream's Dockerfiles start from (glibc-dns-testing,
// regression-issue-74839) or Debian's nginx (upstream mirrors Alpine's).

// glibcDNSSpec is upstream's glibc-dns-testing: a glibc userland with dig
// and the shell tools of the DNS probe scripts (the agnhost rootfs has
// them all), and /coredns, which upstream's Dockerfile also ships.
func (b *builder) glibcDNSSpec(ctx context.Context) (imageSpec, error) {
	bin, err := testbedBinary(b.o.BinDir, CoreDNS)
	if err != nil {
		return imageSpec{}, err
	}
	return b.onRootfs(ctx, agnhostRootfs(), GlibcDNS, GlibcDNSRef, v1.Config{Cmd: []string{"bash"}},
		"switchyard-images: glibc-dns-testing (dnsutils, coredns)", HostFile("coredns", 0o755, bin))
}

// regression74839Spec is the boom server of conntrack.go's "invalid
// conntrack state" spec, built by hack/testbed-build.sh from
// k8s.io/kubernetes/test/images/regression-issue-74839; it needs NET_RAW
// and nothing from its base but libc.
func (b *builder) regression74839Spec(ctx context.Context) (imageSpec, error) {
	const dst = "regression-issue-74839"
	bin, err := testbedBinary(b.o.BinDir, Regression74839)
	if err != nil {
		return imageSpec{}, err
	}
	return b.onRootfs(ctx, agnhostRootfs(), Regression74839, Regression74839Ref, v1.Config{Entrypoint: []string{"/" + dst}},
		"switchyard-images: regression-issue-74839 of k8s.io/kubernetes@"+b.o.K8SVersion, HostFile(dst, 0o755, bin))
}

// nginxSpec serves Debian's default site on port 80 in the foreground, as
// upstream's nginx image does.
func (b *builder) nginxSpec(ctx context.Context) (imageSpec, error) {
	base, err := b.rootfsLayer(ctx, nginxRootfs())
	if err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		name: Nginx,
		ref:  NginxRef,
		config: v1.Config{
			Cmd:          []string{"nginx", "-g", "daemon off;"},
			Env:          []string{defaultPath},
			ExposedPorts: map[string]struct{}{"80/tcp": {}},
			StopSignal:   "SIGQUIT",
		},
		layers: []layerSpec{base},
	}, nil
}
