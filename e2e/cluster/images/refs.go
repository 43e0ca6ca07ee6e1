package images

// Short names of the images Build makes, in the order it returns them.
const (
	ControlPlane = "controlplane"
	Agent        = "agent"
	Pause        = "pause"
	CoreDNS      = "coredns"
	Agnhost      = "agnhost"
	Busybox      = "busybox"
	// KubeProxy is upstream kube-proxy for the comparison runs: built only
	// when Options.Only names it, never by default (make test does not
	// build kube-proxy).
	KubeProxy = "kube-proxy"
	// GlibcDNS, Regression74839 and Nginx are the e2e images only the full
	// [sig-network] suite asks for (DNS probes, the invalid-conntrack-state
	// regression, pods that only need to run): opt-in like KubeProxy, built
	// by make conformance, never by make test.
	GlibcDNS        = "glibc-dns-testing"
	Regression74839 = "regression-issue-74839"
	Nginx           = "nginx"
)

// Names lists every short name, in Build's order.
func Names() []string {
	return []string{ControlPlane, Agent, Pause, CoreDNS, Agnhost, Busybox, KubeProxy, GlibcDNS, Regression74839, Nginx}
}

// Conformance lists the opt-in images of the full e2e suite (not
// kube-proxy, which only its own runs need).
func Conformance() []string {
	return []string{GlibcDNS, Regression74839, Nginx}
}

// Defaults lists the images Build makes when Options.Only is empty: every
// name but the opt-in KubeProxy, in Build's order.
func Defaults() []string {
	return []string{ControlPlane, Agent, Pause, CoreDNS, Agnhost, Busybox}
}

// References of the images. The two Switchyard repositories take the
// caller's tag; the upstream ones carry the names the Kubernetes e2e suite
// and kubelet ask for, so the archives stand in for them once imported.
const (
	ControlPlaneRepo = "ghcr.io/switchyard-proxy/switchyard-controlplane"
	AgentRepo        = "ghcr.io/switchyard-proxy/switchyard-agent"
	CoreDNSRepo      = "registry.k8s.io/coredns/coredns"
	KubeProxyRepo    = "registry.k8s.io/kube-proxy"

	PauseVersion = "3.10.2"
	PauseRef     = "registry.k8s.io/pause:" + PauseVersion
	AgnhostRef   = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	BusyboxRef   = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	// The tags k8s.io/kubernetes/test/utils/image/manifest.go gives them
	// at the pinned version.
	GlibcDNSRef        = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
	Regression74839Ref = "registry.k8s.io/e2e-test-images/regression-issue-74839:1.5"
	NginxRef           = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
)

// ControlPlaneRef is the control plane image's reference for tag.
func ControlPlaneRef(tag string) string { return ControlPlaneRepo + ":" + tag }

// AgentRef is the agent image's reference for tag.
func AgentRef(tag string) string { return AgentRepo + ":" + tag }

// CoreDNSRef is the CoreDNS image's reference for version ("v1.14.6").
func CoreDNSRef(version string) string { return CoreDNSRepo + ":" + version }

// KubeProxyRef is the kube-proxy image's reference for version ("v1.37.2").
func KubeProxyRef(version string) string { return KubeProxyRepo + ":" + version }

// Ref is the reference of the image with the short name short: tag is the
// Switchyard images' tag for controlplane and agent, the CoreDNS version for
// coredns, the Kubernetes version for kube-proxy, and ignored for the
// others. It is "" for an unknown name.
func Ref(short, tag string) string {
	switch short {
	case ControlPlane:
		return ControlPlaneRef(tag)
	case Agent:
		return AgentRef(tag)
	case CoreDNS:
		return CoreDNSRef(tag)
	case KubeProxy:
		return KubeProxyRef(tag)
	case Pause:
		return PauseRef
	case Agnhost:
		return AgnhostRef
	case Busybox:
		return BusyboxRef
	case GlibcDNS:
		return GlibcDNSRef
	case Regression74839:
		return Regression74839Ref
	case Nginx:
		return NginxRef
	}
	return ""
}

// fileName is the archive's file name under the command's -out directory.
func fileName(short string) string {
	switch short {
	case ControlPlane, Agent:
		return "switchyard-" + short + ".tar"
	}
	return short + ".tar"
}
