package images

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// smallSpec is an image of one layer holding the host file src.
func smallSpec(src string) imageSpec {
	return imageSpec{
		name: "small",
		ref:  "example.test/small:1",
		config: v1.Config{
			Entrypoint: []string{"/bin/app"},
			Env:        []string{defaultPath},
			User:       "65532:65532",
			WorkingDir: "/work",
		},
		layers: []layerSpec{{entries: []Entry{HostFile("bin/app", 0o755, src), Dir("tmp", 0o1777)}, createdBy: "test"}},
	}
}

// buildSmall writes smallSpec(src)'s archive in a fresh directory and
// returns its manifest digest and the archive's sha256.
func buildSmall(t *testing.T, src string) (digest string, fileSum [32]byte) {
	t.Helper()
	work := t.TempDir()
	dst := filepath.Join(t.TempDir(), "small.tar")
	digest, err := smallSpec(src).writeArchive(work, dst)
	if err != nil {
		t.Fatalf("writeArchive: %v", err)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	return digest, sha256.Sum256(b)
}

func TestArchiveReproducible(t *testing.T) {
	src := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(src, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d1, f1 := buildSmall(t, src)
	// Touching the input must not matter: only content does.
	if err := os.Chmod(src, 0o700); err != nil {
		t.Fatal(err)
	}
	d2, f2 := buildSmall(t, src)
	if d1 != d2 || f1 != f2 {
		t.Errorf("same inputs, different archives: digests %s vs %s, archive sums %x vs %x", d1, d2, f1, f2)
	}
	k1, err := smallSpec(src).key()
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(src, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d3, _ := buildSmall(t, src)
	if d3 == d1 {
		t.Errorf("different content, same digest %s", d1)
	}
	k3, err := smallSpec(src).key()
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k3 {
		t.Errorf("different content, same cache key %s", k1)
	}
}

// archiveFiles reads the archive's members into a map by name.
func archiveFiles(t *testing.T, p string) map[string][]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func blob(t *testing.T, files map[string][]byte, h v1.Hash) []byte {
	t.Helper()
	b, ok := files["blobs/"+h.Algorithm+"/"+h.Hex]
	if !ok {
		t.Fatalf("archive has no blob %s", h)
	}
	return b
}

func TestArchiveLayout(t *testing.T) {
	src := filepath.Join(t.TempDir(), "app")
	if err := os.WriteFile(src, []byte("app"), 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "small.tar")
	digest, err := smallSpec(src).writeArchive(t.TempDir(), dst)
	if err != nil {
		t.Fatal(err)
	}
	files := archiveFiles(t, dst)
	if _, ok := files["oci-layout"]; !ok {
		t.Error("archive has no oci-layout")
	}
	var index v1.IndexManifest
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	wantAnn := map[string]string{
		"org.opencontainers.image.ref.name": "example.test/small:1",
		"io.containerd.image.name":          "example.test/small:1",
	}
	if diff := cmp.Diff(wantAnn, desc.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if desc.Digest.String() != digest || desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("index entry %s %s, want %s %s", desc.MediaType, desc.Digest, types.OCIManifestSchema1, digest)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index entry platform %+v, want linux/amd64", desc.Platform)
	}

	var m v1.Manifest
	if err := json.Unmarshal(blob(t, files, desc.Digest), &m); err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest config %s, layers %+v: want OCI media types and one layer", m.Config.MediaType, m.Layers)
	}
	var cf v1.ConfigFile
	if err := json.Unmarshal(blob(t, files, m.Config.Digest), &cf); err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != "amd64" || cf.OS != "linux" || !cf.Created.IsZero() {
		t.Errorf("config %s/%s created %v, want linux/amd64 created zero", cf.OS, cf.Architecture, cf.Created)
	}
	if diff := cmp.Diff(smallSpec(src).config, cf.Config); diff != "" {
		t.Errorf("runtime config (-want +got):\n%s", diff)
	}
	if len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("config has %d diff ids, want 1", len(cf.RootFS.DiffIDs))
	}
	_ = blob(t, files, m.Layers[0].Digest)
}

func TestHasVersionVar(t *testing.T) {
	tests := []struct {
		name, src string
		want      bool
	}{
		{"single var", "package main\n\nvar version = \"dev\"\n", true},
		{"in a group", "package main\n\nvar (\n\tx int\n\tversion string\n)\n", true},
		{"a constant", "package main\n\nconst version = \"dev\"\n", false},
		{"a local", "package main\n\nfunc main() { version := 1; _ = version }\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(tt.src), 0o644); err != nil {
				t.Fatal(err)
			}
			// A test file's variable does not count.
			if err := os.WriteFile(filepath.Join(dir, "main_test.go"), []byte("package main\n\nvar version = 1\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := hasVersionVar(dir)
			if err != nil || got != tt.want {
				t.Errorf("hasVersionVar = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestBuildMissingTestbedBinary(t *testing.T) {
	checkNotBuilt(t, Agnhost, "agnhost not built: run hack/testbed-build.sh")
}

// checkNotBuilt builds image alone in an empty checkout, whose binaries
// are not built: Build must return a NotBuiltError that says want.
func checkNotBuilt(t *testing.T, image, want string) {
	t.Helper()
	_, err := Build(t.Context(), Options{
		RepoRoot: t.TempDir(), CacheDir: t.TempDir(), BinDir: t.TempDir(),
		K8SVersion: "v0.0.0", CoreDNSVersion: "v0.0.0", Only: []string{image},
	})
	if !IsNotBuilt(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("Build without %s: %v, want a NotBuiltError", image, err)
	}
}

func TestBuildUnknownImage(t *testing.T) {
	_, err := Build(t.Context(), Options{RepoRoot: t.TempDir(), CacheDir: t.TempDir(),
		K8SVersion: "v0.0.0", CoreDNSVersion: "v0.0.0", Only: []string{"httpd"}})
	if err == nil || !strings.Contains(err.Error(), `unknown image "httpd"`) {
		t.Errorf("Build of an unknown image: %v", err)
	}
}

// TestBuildCoreDNSCached builds the coredns image from a stand-in static
// binary twice: the second run reuses the first archive.
func TestBuildCoreDNSCached(t *testing.T) {
	self, err := os.Executable() // the test binary: static when CGO_ENABLED=0
	if err != nil {
		t.Fatal(err)
	}
	if checkStatic(self) != nil {
		t.Skip("the test binary is not static (cgo); run with CGO_ENABLED=0")
	}
	bin := t.TempDir()
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "coredns"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	o := Options{
		RepoRoot: t.TempDir(), CacheDir: t.TempDir(), BinDir: bin,
		K8SVersion: "v0.0.0", CoreDNSVersion: "v1.14.6", Only: []string{CoreDNS},
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&logs, t.Output()), nil)),
	}
	first, err := Build(t.Context(), o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	second, err := Build(t.Context(), o)
	if err != nil {
		t.Fatalf("Build again: %v", err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("second Build (-first +second):\n%s", diff)
	}
	if len(first) != 1 || first[0].Ref != "registry.k8s.io/coredns/coredns:v1.14.6" {
		t.Errorf("Build = %+v, want the coredns archive", first)
	}
	if !strings.Contains(logs.String(), "status=built") || !strings.Contains(logs.String(), "status=cached") {
		t.Errorf("logs lack a built and a cached line:\n%s", logs.String())
	}
}
