package images

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSelection checks which images and rootfs tarballs a Build would
// make: kube-proxy only when named, and one rootfs for agent and
// kube-proxy together.
func TestSelection(t *testing.T) {
	tests := []struct {
		name       string
		only       []string
		wantImages []string
		wantRootfs int
	}{
		{name: "default set", only: nil, wantImages: Defaults(), wantRootfs: 2},
		{name: "kube-proxy alone", only: []string{KubeProxy}, wantImages: []string{KubeProxy}, wantRootfs: 1},
		{name: "agent and kube-proxy share a rootfs", only: []string{Agent, KubeProxy},
			wantImages: []string{Agent, KubeProxy}, wantRootfs: 1},
		{name: "the suite's images: agnhost's rootfs and nginx's", only: Conformance(),
			wantImages: Conformance(), wantRootfs: 2},
		{name: "glibc-dns-testing and regression-issue-74839 share agnhost's rootfs",
			only: []string{Agnhost, GlibcDNS, Regression74839}, wantImages: []string{Agnhost, GlibcDNS, Regression74839}, wantRootfs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := newBuilder(Options{RepoRoot: t.TempDir(), CacheDir: t.TempDir(),
				K8SVersion: "v0.0.0", CoreDNSVersion: "v0.0.0", Only: tt.only})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range Names() {
				if b.selected[n] {
					got = append(got, n)
				}
			}
			if diff := cmp.Diff(tt.wantImages, got); diff != "" {
				t.Errorf("selected (-want +got):\n%s", diff)
			}
			if n := len(b.rootfsNeeded()); n != tt.wantRootfs {
				t.Errorf("rootfsNeeded: %d tarballs, want %d", n, tt.wantRootfs)
			}
		})
	}
	for _, n := range append([]string{KubeProxy}, Conformance()...) {
		if slices.Contains(Defaults(), n) {
			t.Errorf("Defaults() = %v: %s must be opt-in", Defaults(), n)
		}
		if Ref(n, "v1.37.2") == "" {
			t.Errorf("Ref(%s) is empty", n)
		}
	}
	if got := Ref(KubeProxy, "v1.37.2"); got != "registry.k8s.io/kube-proxy:v1.37.2" {
		t.Errorf("Ref(kube-proxy) = %q", got)
	}
}

func TestBuildKubeProxyNotBuilt(t *testing.T) {
	checkNotBuilt(t, KubeProxy, "kube-proxy not built")
}
