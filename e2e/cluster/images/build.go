package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// Options says which images Build makes and from what.
type Options struct {
	RepoRoot string // the Switchyard checkout: go build of its binaries, hack/versions.env
	CacheDir string // default DefaultCacheDir()
	BinDir   string // test-bed bin dir with agnhost, coredns and kube-proxy (hack/testbed-build.sh bindir)
	Tag      string // tag of the two Switchyard images; default "dev"

	K8SVersion     string // pause.c's k8s.io/kubernetes version and kube-proxy's tag; default K8S_VERSION of versions.env
	CoreDNSVersion string // CoreDNS image tag; default COREDNS_VERSION of versions.env

	Only   []string // short names (see Names); empty means Defaults (all but kube-proxy)
	Logger *slog.Logger
}

// Archive is one OCI archive Build made or found in the cache.
type Archive struct {
	Name   string // short name, e.g. "agent"
	Ref    string // full reference, e.g. "ghcr.io/switchyard-proxy/switchyard-agent:bed"
	Path   string // the .tar in the cache; do not modify it
	Digest string // manifest digest, "sha256:…"
}

// FileName is the archive's conventional file name, e.g. "switchyard-agent.tar".
func (a Archive) FileName() string { return fileName(a.Name) }

// DefaultCacheDir is $SWITCHYARD_CACHE_DIR/images, where
// SWITCHYARD_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/switchyard
// as in hack/testbed-build.sh.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("SWITCHYARD_CACHE_DIR"); d != "" {
		return filepath.Join(d, "images"), nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "switchyard", "images"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "switchyard", "images"), nil
}

// staleAfter is how long an archive superseded by a newer one of the same
// image stays in the cache after its last use.
const staleAfter = 24 * time.Hour

// Build makes the OCI archives of the selected images, reusing each from
// the cache when its inputs are unchanged, and returns them in Names'
// order. Agent and kube-proxy share one rootfs, built (or cached) once. The Debian rootfs tarballs are built first and concurrently; the
// Go and C builds run one at a time meanwhile.
func Build(ctx context.Context, o Options) ([]Archive, error) {
	b, err := newBuilder(o)
	if err != nil {
		return nil, err
	}
	if err := b.preflight(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for _, s := range b.rootfsNeeded() {
		p := &pendingRootfs{done: make(chan struct{})}
		b.rootfs[s.file(b.rootfsDir)] = p
		wg.Go(func() {
			defer close(p.done)
			p.path, p.err = ensureRootfs(ctx, b.log, b.rootfsDir, s)
			if p.err != nil {
				cancel(p.err)
			}
		})
	}
	fail := func(err error) ([]Archive, error) {
		cancel(err)
		wg.Wait()
		return nil, context.Cause(ctx) // the first failure
	}
	built := map[string]Archive{}
	// The images on a rootfs go last: the others build while it downloads.
	for _, name := range []string{ControlPlane, Pause, CoreDNS, Busybox, Agent, KubeProxy, Agnhost, GlibcDNS, Regression74839, Nginx} {
		if !b.selected[name] {
			continue
		}
		a, err := b.archive(ctx, name)
		if err != nil {
			return fail(fmt.Errorf("image %s: %w", name, err))
		}
		built[name] = a
	}
	wg.Wait()
	var out []Archive
	for _, name := range Names() {
		if a, ok := built[name]; ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// builder is one Build call's state.
type builder struct {
	o          Options
	log        *slog.Logger
	selected   map[string]bool
	archiveDir string
	rootfsDir  string
	tmpDir     string
	rootfs     map[string]*pendingRootfs // by cache file
}

// pendingRootfs is a rootfs build Build started; path and err are set
// before done closes.
type pendingRootfs struct {
	done chan struct{}
	path string
	err  error
}

func newBuilder(o Options) (*builder, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Tag == "" {
		o.Tag = "dev"
	}
	if o.RepoRoot == "" {
		return nil, errors.New("images: Options.RepoRoot is empty")
	}
	root, err := filepath.Abs(o.RepoRoot)
	if err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	o.RepoRoot = root
	if o.CacheDir == "" {
		if o.CacheDir, err = DefaultCacheDir(); err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
	}
	if o.K8SVersion == "" || o.CoreDNSVersion == "" {
		v, err := apiserver.PinnedVars(o.RepoRoot)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		if o.K8SVersion == "" {
			o.K8SVersion = v["K8S_VERSION"]
		}
		if o.CoreDNSVersion == "" {
			o.CoreDNSVersion = v["COREDNS_VERSION"]
		}
	}
	selected := map[string]bool{}
	for _, n := range o.Only {
		if !slices.Contains(Names(), n) {
			return nil, fmt.Errorf("images: unknown image %q (want one of %s)", n, strings.Join(Names(), ", "))
		}
		selected[n] = true
	}
	if len(selected) == 0 {
		for _, n := range Defaults() {
			selected[n] = true
		}
	}
	b := &builder{
		o: o, log: o.Logger, selected: selected,
		archiveDir: filepath.Join(o.CacheDir, "archives"),
		rootfsDir:  filepath.Join(o.CacheDir, "rootfs"),
		tmpDir:     filepath.Join(o.CacheDir, "tmp"),
		rootfs:     map[string]*pendingRootfs{},
	}
	for _, d := range []string{b.archiveDir, b.rootfsDir, b.tmpDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("images: cache: %w", err)
		}
	}
	removeStale(b.tmpDir, "*")
	removeStale(b.rootfsDir, ".mmdebstrap-*")
	return b, nil
}

// removeStale removes what a killed run left in dir: the entries matching
// pattern that are older than staleAfter. Errors are ignored.
func removeStale(dir, pattern string) {
	old, _ := filepath.Glob(filepath.Join(dir, pattern))
	for _, p := range old {
		if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > staleAfter {
			os.RemoveAll(p)
		}
	}
}

// preflight fails before anything long starts when an input is missing.
func (b *builder) preflight() error {
	if (b.selected[Pause] || b.selected[KubeProxy]) && b.o.K8SVersion == "" {
		return errors.New("images: no K8S_VERSION (Options.K8SVersion or hack/versions.env)")
	}
	if b.selected[CoreDNS] && b.o.CoreDNSVersion == "" {
		return errors.New("images: no COREDNS_VERSION (Options.CoreDNSVersion or hack/versions.env)")
	}
	for image, bins := range map[string][]string{CoreDNS: {CoreDNS}, Agnhost: {Agnhost, CoreDNS}, KubeProxy: {KubeProxy},
		GlibcDNS: {CoreDNS}, Regression74839: {Regression74839}} {
		if !b.selected[image] {
			continue
		}
		for _, bin := range bins {
			if _, err := testbedBinary(b.o.BinDir, bin); err != nil {
				return fmt.Errorf("images: %w", err)
			}
		}
	}
	return nil
}

// rootfsNeeded lists the rootfs tarballs of the selected images.
func (b *builder) rootfsNeeded() []rootfsSpec {
	var specs []rootfsSpec
	if b.selected[Agent] || b.selected[KubeProxy] {
		specs = append(specs, agentRootfs()) // one rootfs for both
	}
	if b.selected[Agnhost] || b.selected[GlibcDNS] || b.selected[Regression74839] {
		specs = append(specs, agnhostRootfs()) // one rootfs for the three
	}
	if b.selected[Nginx] {
		specs = append(specs, nginxRootfs())
	}
	return specs
}

// meta is the sidecar of a cached archive.
type meta struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	Key    string `json:"key"`
}

// archive returns the image name's archive: the cached one when an
// archive of the same inputs exists, otherwise a new one.
func (b *builder) archive(ctx context.Context, name string) (Archive, error) {
	start := time.Now()
	work, err := os.MkdirTemp(b.tmpDir, name+"-*")
	if err != nil {
		return Archive{}, err
	}
	defer os.RemoveAll(work)
	spec, err := b.spec(ctx, name, work)
	if err != nil {
		return Archive{}, err
	}
	key, err := spec.key()
	if err != nil {
		return Archive{}, err
	}
	stem := strings.TrimSuffix(fileName(name), ".tar")
	base := filepath.Join(b.archiveDir, stem+"-"+key[:16])
	a := Archive{Name: name, Ref: spec.ref, Path: base + ".tar"}
	if m, ok := readMeta(base+".json", a.Path); ok && m.Key == key && m.Ref == spec.ref {
		a.Digest = m.Digest
		now := time.Now()
		_ = os.Chtimes(a.Path, now, now) // marks it used, for pruning
		b.log.Info("image", "ref", a.Ref, "status", "cached", "seconds", seconds(start), "digest", a.Digest, "path", a.Path)
		return a, nil
	}
	if a.Digest, err = spec.writeArchive(work, a.Path); err != nil {
		return Archive{}, err
	}
	mb, err := json.Marshal(meta{Ref: a.Ref, Digest: a.Digest, Key: key})
	if err != nil {
		return Archive{}, err
	}
	if err := writeFileAtomic(base+".json", func(w io.Writer) error { _, err := w.Write(mb); return err }); err != nil {
		return Archive{}, err
	}
	b.log.Info("image", "ref", a.Ref, "status", "built", "seconds", seconds(start), "digest", a.Digest, "path", a.Path)
	b.prune(stem, a.Path)
	return a, nil
}

func readMeta(p, archive string) (meta, bool) {
	var m meta
	b, err := os.ReadFile(p)
	if err != nil || json.Unmarshal(b, &m) != nil {
		return meta{}, false
	}
	if _, err := os.Stat(archive); err != nil {
		return meta{}, false
	}
	return m, true
}

// prune removes the archives of stem other than keep that were not used
// for staleAfter. Failing to remove one is harmless and not reported.
func (b *builder) prune(stem, keep string) {
	old, _ := filepath.Glob(filepath.Join(b.archiveDir, stem+"-"+strings.Repeat("?", 16)+".tar"))
	for _, p := range old {
		fi, err := os.Stat(p)
		if p == keep || err != nil || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		os.Remove(p)
		os.Remove(strings.TrimSuffix(p, ".tar") + ".json")
		b.log.Info("image", "pruned", p)
	}
}
