package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Host paths the images copy from.
const (
	hostBusybox = "/bin/busybox" // Debian's busybox-static
	hostCACerts = "/etc/ssl/certs/ca-certificates.crt"
)

// nonrootAccounts are /etc/passwd and /etc/group with root and the
// distroless "nonroot" user 65532, and its home.
func nonrootAccounts() []Entry {
	return []Entry{
		File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\n"+
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"+
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")),
		File("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")),
		{Path: "home/nonroot", Kind: KindDir, Mode: 0o700, Uid: 65532, Gid: 65532},
		Dir("tmp", 0o1777),
	}
}

// spec prepares the inputs of the image name in work (building binaries
// as needed) and returns what the image is made of.
func (b *builder) spec(ctx context.Context, name, work string) (imageSpec, error) {
	switch name {
	case ControlPlane:
		return b.controlPlaneSpec(ctx, work)
	case Agent:
		return b.agentSpec(ctx, work)
	case Pause:
		return b.pauseSpec(ctx, work)
	case CoreDNS:
		return b.coreDNSSpec()
	case Agnhost:
		return b.agnhostSpec(ctx)
	case Busybox:
		return b.busyboxSpec(ctx)
	case KubeProxy:
		return b.kubeProxySpec(ctx)
	case GlibcDNS:
		return b.glibcDNSSpec(ctx)
	case Regression74839:
		return b.regression74839Spec(ctx)
	case Nginx:
		return b.nginxSpec(ctx)
	}
	return imageSpec{}, fmt.Errorf("unknown image %q", name)
}

func (b *builder) controlPlaneSpec(ctx context.Context, work string) (imageSpec, error) {
	const dst = "usr/local/bin/switchyard-controlplane"
	bin := filepath.Join(work, "switchyard-controlplane")
	if err := goBuild(ctx, b.o.RepoRoot, "./controlplane/cmd/switchyard-controlplane", bin, b.o.Tag); err != nil {
		return imageSpec{}, err
	}
	entries := append(nonrootAccounts(), HostFile(dst, 0o755, bin))
	return imageSpec{
		name: ControlPlane,
		ref:  ControlPlaneRef(b.o.Tag),
		config: v1.Config{
			Entrypoint: []string{"/" + dst},
			Env:        []string{defaultPath},
			User:       "65532:65532",
		},
		layers: []layerSpec{{entries: entries, createdBy: "switchyard-images: switchyard-controlplane, /etc/passwd, /tmp"}},
	}, nil
}

func (b *builder) agentSpec(ctx context.Context, work string) (imageSpec, error) {
	const dst = "usr/local/bin/switchyard-agent"
	bin := filepath.Join(work, "switchyard-agent")
	if err := goBuild(ctx, b.o.RepoRoot, "./nodeagent/cmd/switchyard-agent", bin, b.o.Tag); err != nil {
		return imageSpec{}, err
	}
	return b.onRootfs(ctx, agentRootfs(), Agent, AgentRef(b.o.Tag), v1.Config{Entrypoint: []string{"/" + dst}},
		"switchyard-images: switchyard-agent", HostFile(dst, 0o755, bin))
}

// kubeProxySpec is upstream kube-proxy from the test-bed bin dir on the
// agent's rootfs: the same iptables (-nft and -legacy), nft, ipset,
// conntrack and ip, so the two proxies are compared on one userland and the
// rootfs is cached once. The manifests name the binary in command, as
// upstream's do; the entrypoint is only a convenience.
func (b *builder) kubeProxySpec(ctx context.Context) (imageSpec, error) {
	const dst = "usr/local/bin/kube-proxy"
	bin, err := testbedBinary(b.o.BinDir, KubeProxy)
	if err != nil {
		return imageSpec{}, err
	}
	return b.onRootfs(ctx, agentRootfs(), KubeProxy, KubeProxyRef(b.o.K8SVersion), v1.Config{Entrypoint: []string{"/" + dst}},
		"switchyard-images: kube-proxy of k8s.io/kubernetes@"+b.o.K8SVersion, HostFile(dst, 0o755, bin))
}

func (b *builder) pauseSpec(ctx context.Context, work string) (imageSpec, error) {
	bin := filepath.Join(work, "pause")
	if err := buildPause(ctx, work, b.o.K8SVersion, bin); err != nil {
		return imageSpec{}, err
	}
	return imageSpec{
		name: Pause,
		ref:  PauseRef,
		config: v1.Config{
			Entrypoint: []string{"/pause"},
			Env:        []string{defaultPath},
			User:       "65535:65535",
		},
		layers: []layerSpec{{entries: []Entry{HostFile("pause", 0o755, bin)},
			createdBy: "switchyard-images: pause.c of k8s.io/kubernetes@" + b.o.K8SVersion}},
	}, nil
}

func (b *builder) coreDNSSpec() (imageSpec, error) {
	bin, err := testbedBinary(b.o.BinDir, "coredns")
	if err != nil {
		return imageSpec{}, err
	}
	if err := checkStatic(bin); err != nil {
		return imageSpec{}, err
	}
	entries := []Entry{HostFile("coredns", 0o755, bin)}
	if _, err := os.Stat(hostCACerts); err == nil {
		entries = append(entries, HostFile(strings.TrimPrefix(hostCACerts, "/"), 0o644, hostCACerts))
	}
	return imageSpec{
		name: CoreDNS,
		ref:  CoreDNSRef(b.o.CoreDNSVersion),
		config: v1.Config{
			Entrypoint:   []string{"/coredns"},
			Env:          []string{defaultPath},
			ExposedPorts: map[string]struct{}{"53/tcp": {}, "53/udp": {}},
		},
		layers: []layerSpec{{entries: entries, createdBy: "switchyard-images: coredns " + b.o.CoreDNSVersion}},
	}, nil
}

func (b *builder) agnhostSpec(ctx context.Context) (imageSpec, error) {
	bin, err := testbedBinary(b.o.BinDir, "agnhost")
	if err != nil {
		return imageSpec{}, err
	}
	// porter serves TLS with upstream's test certificate from the working
	// directory ("should proxy through a service and a pod" reaches its
	// TLS ports), as upstream's Dockerfile adds it; netexec uploads to
	// /uploads.
	porter, err := kubeSource(ctx, b.o.K8SVersion, "test/images/agnhost/porter")
	if err != nil {
		return imageSpec{}, err
	}
	// /coredns as upstream's Dockerfile ships it: DNS specs ("configurable
	// pod resolv.conf", "DNS configMap nameserver") run their own DNS
	// server from this image.
	coredns, err := testbedBinary(b.o.BinDir, CoreDNS)
	if err != nil {
		return imageSpec{}, err
	}
	// Cmd as upstream's image.
	return b.onRootfs(ctx, agnhostRootfs(), Agnhost, AgnhostRef, v1.Config{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}},
		"switchyard-images: agnhost, /coredns, porter's localhost.crt and .key, /uploads", HostFile("agnhost", 0o755, bin),
		HostFile("coredns", 0o755, coredns),
		HostFile("localhost.crt", 0o644, filepath.Join(porter, "localhost.crt")),
		HostFile("localhost.key", 0o644, filepath.Join(porter, "localhost.key")),
		Dir("uploads", 0o755))
}

func (b *builder) busyboxSpec(ctx context.Context) (imageSpec, error) {
	if err := checkStatic(hostBusybox); err != nil {
		return imageSpec{}, fmt.Errorf("busybox (apt-get install busybox-static): %w", err)
	}
	applets, err := busyboxApplets(ctx, hostBusybox)
	if err != nil {
		return imageSpec{}, err
	}
	entries := []Entry{
		HostFile("bin/busybox", 0o755, hostBusybox),
		File("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n")),
		File("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")),
		Dir("root", 0o700),
		Dir("tmp", 0o1777),
	}
	for _, a := range applets {
		entries = append(entries, Symlink("bin/"+a, "busybox"))
	}
	return imageSpec{
		name:   Busybox,
		ref:    BusyboxRef,
		config: v1.Config{Cmd: []string{"sh"}, Env: []string{defaultPath}},
		layers: []layerSpec{{entries: entries, createdBy: "switchyard-images: busybox-static and its applets"}},
	}, nil
}

// onRootfs is an image of files added to a Debian rootfs (Build started
// it); config gets the default PATH.
func (b *builder) onRootfs(ctx context.Context, s rootfsSpec, name, ref string, config v1.Config, createdBy string, files ...Entry) (imageSpec, error) {
	base, err := b.rootfsLayer(ctx, s)
	if err != nil {
		return imageSpec{}, err
	}
	config.Env = append(config.Env, defaultPath)
	return imageSpec{name: name, ref: ref, config: config,
		layers: []layerSpec{base, {entries: files, createdBy: createdBy}}}, nil
}

// rootfsLayer waits for the rootfs s, started by Build, and is its layer.
func (b *builder) rootfsLayer(ctx context.Context, s rootfsSpec) (layerSpec, error) {
	p, ok := b.rootfs[s.file(b.rootfsDir)]
	if !ok {
		return layerSpec{}, fmt.Errorf("rootfs %s was not started", s.file(b.rootfsDir))
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return layerSpec{}, context.Cause(ctx)
	}
	if p.err != nil {
		return layerSpec{}, p.err
	}
	return layerSpec{gzipped: p.path, createdBy: fmt.Sprintf("mmdebstrap --variant=%s --include=%s %s",
		s.Variant, strings.Join(s.Packages, ","), s.Suite)}, nil
}
