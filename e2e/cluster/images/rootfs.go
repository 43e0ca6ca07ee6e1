package images

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// debianMirror is the apt mirror mmdebstrap downloads from.
const debianMirror = "http://deb.debian.org/debian"

// rootfsVersion changes with NormalizeTar's or dropFromRootfs's rules, so
// a rootfs made the old way is not reused (mmdebstrap's arguments are part
// of the key anyway).
const rootfsVersion = "rootfs/v1"

// rootfsSpec is a Debian root file system that mmdebstrap builds once and
// the cache keeps under the hash of these fields.
type rootfsSpec struct {
	Suite    string   `json:"suite"`
	Variant  string   `json:"variant"`
	Packages []string `json:"packages"`
	Mirror   string   `json:"mirror"`
	// Require lists paths the result must contain; a missing one fails the
	// build rather than an image that cannot do its job.
	Require []string `json:"require"`
}

// Both rootfs include usr-is-merged: it satisfies init-system-helpers'
// "usrmerge | usr-is-merged", which apt would otherwise meet with usrmerge
// and its ~40 MB of perl.

// agentRootfs is the agent's userland, as in deploy/images/agent.Dockerfile:
// iptables (the -nft and -legacy back ends side by side), ipset and ipvsadm,
// conntrack, nft and ip.
func agentRootfs() rootfsSpec {
	return rootfsSpec{
		Suite: "bookworm", Variant: "essential", Mirror: debianMirror,
		Packages: []string{"conntrack", "ipset", "iproute2", "iptables", "ipvsadm", "nftables", "usr-is-merged"},
		Require: []string{"usr/sbin/iptables-nft", "usr/sbin/iptables-legacy", "usr/sbin/nft",
			"usr/sbin/ipset", "usr/sbin/ipvsadm", "usr/sbin/conntrack", "usr/sbin/ip"},
	}
}

// agnhostRootfs holds the tools the e2e specs exec in agnhost pods.
func agnhostRootfs() rootfsSpec {
	return rootfsSpec{
		Suite: "bookworm", Variant: "essential", Mirror: debianMirror,
		Packages: []string{"bash", "conntrack", "curl", "dnsutils", "iproute2", "iptables",
			"netcat-openbsd", "procps", "socat", "usr-is-merged", "util-linux", "wget"},
		Require: []string{"usr/bin/bash", "usr/bin/sh", "usr/bin/curl", "usr/bin/wget", "usr/bin/nc",
			"usr/bin/dig", "usr/bin/nslookup", "usr/bin/socat", "usr/sbin/ip", "usr/bin/ps"},
	}
}

// nginxRootfs is Debian's nginx for the pods the specs only need running
// and listening (upstream's image is nginx:1.27-alpine, untouched).
func nginxRootfs() rootfsSpec {
	return rootfsSpec{
		Suite: "bookworm", Variant: "essential", Mirror: debianMirror,
		Packages: []string{"nginx-light", "usr-is-merged"},
		Require:  []string{"usr/sbin/nginx", "etc/nginx/nginx.conf"},
	}
}

// file is the cached rootfs's path under dir: its name hashes the spec and
// the mmdebstrap command line.
func (s rootfsSpec) file(dir string) string {
	s.Packages = slices.Sorted(slices.Values(s.Packages))
	s.Require = slices.Sorted(slices.Values(s.Require))
	b, _ := json.Marshal(s) // a struct of strings always encodes
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", rootfsVersion, b, strings.Join(s.mmdebstrapArgs("OUT"), " "))
	sum := h.Sum(nil)
	return filepath.Join(dir, fmt.Sprintf("debian-%s-%s-%x.tar.gz", s.Suite, s.Variant, sum[:8]))
}

// mmdebstrapArgs builds the rootfs as a tar stream into out. The unshare
// mode gives the maintainer scripts their own mount, pid, uts and ipc
// namespaces (as root, no user namespace); the network is the host's,
// which apt needs. Manual pages, info pages, translations and
// documentation other than the copyright files are not installed.
func (s rootfsSpec) mmdebstrapArgs(out string) []string {
	return []string{
		"--mode=unshare",
		"--variant=" + s.Variant,
		"--include=" + strings.Join(s.Packages, ","),
		"--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/info/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
		"--dpkgopt=path-exclude=/usr/share/doc/*",
		"--dpkgopt=path-include=/usr/share/doc/*/copyright",
		s.Suite, out, s.Mirror,
	}
}

// ensureRootfs returns the cached gzip-compressed, normalised rootfs
// tarball for s under dir, building it with mmdebstrap when absent. A lock
// file keeps two processes from building the same one at once.
func ensureRootfs(ctx context.Context, log *slog.Logger, dir string, s rootfsSpec) (string, error) {
	final := s.file(dir)
	if _, err := os.Stat(final); err == nil {
		log.Info("rootfs", "file", final, "status", "cached", "packages", strings.Join(s.Packages, ","))
		return final, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("rootfs cache: %w", err)
	}
	unlock, err := lockFile(ctx, final+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil { // built by another process meanwhile
		return final, nil
	}
	start := time.Now()
	tmp, err := os.MkdirTemp(dir, ".mmdebstrap-*")
	if err != nil {
		return "", fmt.Errorf("rootfs: %w", err)
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "rootfs.tar")
	log.Info("rootfs", "file", final, "status", "building", "packages", strings.Join(s.Packages, ","))
	if err := runMmdebstrap(ctx, log, s, raw); err != nil {
		return "", err
	}
	if err := normalizeRootfs(raw, final, s.Require); err != nil {
		return "", fmt.Errorf("rootfs %s: %w", filepath.Base(final), err)
	}
	log.Info("rootfs", "file", final, "status", "built", "seconds", seconds(start))
	return final, nil
}

func runMmdebstrap(ctx context.Context, log *slog.Logger, s rootfsSpec, out string) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return fmt.Errorf("rootfs: mmdebstrap not found (apt-get install mmdebstrap): %w", err)
	}
	cmd := exec.CommandContext(ctx, "mmdebstrap", s.mmdebstrapArgs(out)...)
	// SOURCE_DATE_EPOCH makes mmdebstrap clamp times and drop its logs,
	// so the same mirror state gives the same tarball.
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0")
	// On cancellation let mmdebstrap stop its apt and dpkg children and
	// remove its temporary chroot; kill it only if it takes too long.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	tail := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = tail, tail
	start := time.Now()
	stop := progress(log, "rootfs", strings.Join(s.Packages, ","), start)
	err := cmd.Run()
	stop()
	if err != nil {
		return fmt.Errorf("mmdebstrap %s (needs root, or subuid/subgid for its unshare mode): %w\n%s",
			strings.Join(s.mmdebstrapArgs(out), " "), err, tail)
	}
	return nil
}

// normalizeRootfs rewrites mmdebstrap's tarball raw into the gzip file
// final (see NormalizeTar and dropFromRootfs), failing when a required path
// is missing.
func normalizeRootfs(raw, final string, require []string) error {
	in, err := os.Open(raw)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeFileAtomic(final, func(w io.Writer) error {
		seen := map[string]bool{}
		drop := func(name string) bool {
			if dropFromRootfs(name) {
				return true
			}
			seen[name] = true
			return false
		}
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		if err := NormalizeTar(zw, in, drop); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		var missing []string
		for _, p := range require {
			if !seen[p] {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the rootfs lacks %s", strings.Join(missing, ", "))
		}
		return nil
	})
}

// lockFile takes an exclusive flock on p, waiting until it is free or ctx
// ends. The returned function releases it.
func lockFile(ctx context.Context, p string) (func(), error) {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", p, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// progress logs a line every 30 s until the returned function is called,
// so a two-minute step does not look hung.
func progress(log *slog.Logger, what, detail string, start time.Time) func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				log.Info(what, "detail", detail, "status", "still building", "seconds", seconds(start))
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.buf) }

func seconds(start time.Time) float64 {
	return float64(time.Since(start).Milliseconds()) / 1000
}
