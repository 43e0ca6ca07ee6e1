// Command switchyard-images builds the test bed's container images as OCI
// archives without Docker and without a registry (package
// e2e/cluster/images), copies them into -out and prints how to import or
// push each:
//
//	switchyard-images -only controlplane,agent -tag dev -out out/images
//
// Images: controlplane, agent (ghcr.io/switchyard-proxy/…:<tag>), pause,
// coredns, agnhost, busybox (the registry.k8s.io references the e2e suite
// uses), and, only when named in -only, kube-proxy
// (registry.k8s.io/kube-proxy:<K8S_VERSION> on the agent's rootfs). Archives are cached by content in $SWITCHYARD_CACHE_DIR/images
// (default ~/.cache/switchyard/images); a rebuild with the same inputs takes
// seconds and gives the same digest. The agent and agnhost images sit on a
// Debian bookworm rootfs built once by mmdebstrap (about a minute from
// deb.debian.org), which needs root (or subuid/subgid for its unshare mode).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
)

func main() {
	var c config
	fs := flag.NewFlagSet("switchyard-images", flag.ExitOnError)
	fs.StringVar(&c.out, "out", "out/images", "directory the archives are hard-linked (or copied) into, as <image>.tar")
	fs.StringVar(&c.tag, "tag", "dev", "tag of the switchyard-controlplane and switchyard-agent images")
	fs.StringVar(&c.only, "only", "", "comma-separated subset of "+strings.Join(images.Names(), ",")+" (default all but kube-proxy, which is built only when named)")
	fs.StringVar(&c.binDir, "bindir", "", "test-bed bin dir holding agnhost, coredns and kube-proxy (default: the output of hack/testbed-build.sh bindir)")
	fs.StringVar(&c.repo, "repo", "", "Switchyard checkout (default: the directory holding go.work above the working directory)")
	fs.StringVar(&c.cache, "cache", "", "cache directory (default $SWITCHYARD_CACHE_DIR/images, ~/.cache/switchyard/images)")
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: switchyard-images [flags]\n\n"+
			"Builds container images as OCI archives without Docker or a registry, caches them by\n"+
			"content, copies them into -out and prints how to import (ctr) or push (skopeo, crane)\n"+
			"each. The agent and agnhost images need a Debian rootfs from mmdebstrap: root (or\n"+
			"subuid/subgid), network to deb.debian.org, about a minute once; everything else\n"+
			"needs neither root nor network.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:])
	const name = "switchyard-images"
	if fs.NArg() > 0 {
		fs.Usage()
		cmdshell.Exit(name, cmdshell.Usage(fmt.Errorf("unexpected arguments %q", fs.Args())))
	}
	cmdshell.Run(name, func(ctx context.Context) error { return run(ctx, os.Stdout, cmdshell.Logger(slog.LevelInfo), c) })
}

// config is the command line.
type config struct {
	out, tag, only, binDir, repo, cache string
}

func run(ctx context.Context, stdout io.Writer, log *slog.Logger, c config) error {
	var err error
	repo, binDir := c.repo, c.binDir
	if repo == "" {
		if repo, err = findRepo(); err != nil {
			return err
		}
	}
	var names []string
	if c.only != "" {
		names = strings.Split(c.only, ",")
	}
	if binDir == "" && needsBinDir(names) {
		if binDir, err = testbedBinDir(ctx, repo); err != nil {
			return err
		}
	}
	archives, err := images.Build(ctx, images.Options{
		RepoRoot: repo, CacheDir: c.cache, BinDir: binDir, Tag: c.tag, Only: names, Logger: log,
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	for _, a := range archives {
		dst := filepath.Join(c.out, a.FileName())
		if err := place(a.Path, dst); err != nil {
			return err
		}
		printArchive(stdout, a, dst)
	}
	return nil
}

func needsBinDir(names []string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		switch n {
		case images.Agnhost, images.CoreDNS, images.KubeProxy, images.GlibcDNS, images.Regression74839:
			return true
		}
	}
	return false
}

// findRepo is the nearest directory holding go.work, from the working
// directory up.
func findRepo() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no go.work above %s: pass -repo", wd)
}

func testbedBinDir(ctx context.Context, repo string) (string, error) {
	b, err := exec.CommandContext(ctx, filepath.Join(repo, "hack", "testbed-build.sh"), "bindir").Output()
	if err != nil {
		return "", fmt.Errorf("hack/testbed-build.sh bindir: %w (pass -bindir)", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// place puts the cached archive at dst: a hard link when the cache is on
// the same file system, a copy otherwise; dst is replaced atomically.
func place(src, dst string) error {
	if s, err := os.Stat(src); err == nil {
		if d, err := os.Stat(dst); err == nil && os.SameFile(s, d) {
			return nil // already this archive (rename would be a no-op and leave tmp)
		}
	}
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("placing %s: %w", dst, err)
	}
	return nil
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		return errors.Join(fmt.Errorf("copying %s: %w", src, err), o.Close())
	}
	return o.Close()
}

func printArchive(w io.Writer, a images.Archive, dst string) {
	repoTag := a.Ref[strings.LastIndex(a.Ref, "/")+1:] // "switchyard-agent:dev"
	fmt.Fprintf(w, "%s\n  archive: %s\n  digest:  %s\n", a.Ref, dst, a.Digest)
	fmt.Fprintf(w, "  import:  ctr -n k8s.io images import %s\n", dst)
	fmt.Fprintf(w, "  push:    skopeo copy oci-archive:%s docker://REGISTRY/%s\n", dst, repoTag)
	fmt.Fprintf(w, "           or: mkdir -p L && tar -xf %s -C L && crane push L REGISTRY/%s\n", dst, repoTag)
}
