package images

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Kind is the type of one tarball member.
type Kind int

// The member kinds WriteTar knows.
const (
	KindFile Kind = iota
	KindDir
	KindSymlink
)

// Entry is one member of a tarball WriteTar writes. Ownership defaults to
// 0:0; there are no times, user or group names: a member is its path, mode,
// owner and content, nothing else.
type Entry struct {
	Path   string // slash-separated, relative to the root: "usr/local/bin/x"
	Kind   Kind
	Mode   int64  // permission bits with setuid/setgid/sticky, e.g. 0o755, 0o1777
	Uid    int    // owner, 0 unless set
	Gid    int    // group, 0 unless set
	Data   []byte // content of a file whose Source is empty
	Source string // host file a file's content is read from
	Link   string // target of a symlink
}

// File is a regular file with the given content.
func File(p string, mode int64, data []byte) Entry {
	return Entry{Path: p, Kind: KindFile, Mode: mode, Data: data}
}

// HostFile is a regular file whose content is read from the host file src
// when the tarball is written.
func HostFile(p string, mode int64, src string) Entry {
	return Entry{Path: p, Kind: KindFile, Mode: mode, Source: src}
}

// Dir is a directory.
func Dir(p string, mode int64) Entry {
	return Entry{Path: p, Kind: KindDir, Mode: mode}
}

// Symlink is a symbolic link to target.
func Symlink(p, target string) Entry {
	return Entry{Path: p, Kind: KindSymlink, Mode: 0o777, Link: target}
}

// epoch is every member's modification time.
var epoch = time.Unix(0, 0)

// WriteTar writes entries as an uncompressed tar stream to w, the same bytes
// for the same entries: members sorted by path, each parent directory
// present (missing ones are added with mode 0755), mtime 0, no user or group
// names. It fails on an invalid or duplicate path, and on a host file whose
// size changes while it is read.
func WriteTar(w io.Writer, entries []Entry) error {
	all, err := withParents(entries)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, e := range all {
		if err := writeEntry(tw, e); err != nil {
			return fmt.Errorf("tar member %s: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing tar: %w", err)
	}
	return nil
}

// withParents cleans and checks every path, adds the missing parent
// directories and sorts the result by path; a parent sorts before its
// children because it is their prefix.
func withParents(entries []Entry) ([]Entry, error) {
	byPath := make(map[string]Entry, len(entries))
	for _, e := range entries {
		p, err := cleanPath(e.Path)
		if err != nil {
			return nil, err
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("duplicate tar member %q", p)
		}
		e.Path = p
		byPath[p] = e
	}
	for p := range byPath {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			parent, ok := byPath[dir]
			if !ok {
				byPath[dir] = Dir(dir, 0o755)
				continue
			}
			if parent.Kind != KindDir {
				return nil, fmt.Errorf("tar member %q: parent %q is not a directory", p, dir)
			}
		}
	}
	all := make([]Entry, 0, len(byPath))
	for _, e := range byPath {
		all = append(all, e)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Path < all[j].Path })
	return all, nil
}

func cleanPath(p string) (string, error) {
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("invalid tar member path %q", p)
	}
	return c, nil
}

func writeEntry(tw *tar.Writer, e Entry) error {
	h := &tar.Header{
		Name:    e.Path,
		Mode:    e.Mode,
		Uid:     e.Uid,
		Gid:     e.Gid,
		ModTime: epoch,
	}
	switch e.Kind {
	case KindDir:
		h.Typeflag = tar.TypeDir
		h.Name += "/"
		return tw.WriteHeader(h)
	case KindSymlink:
		h.Typeflag = tar.TypeSymlink
		h.Linkname = e.Link
		return tw.WriteHeader(h)
	case KindFile:
		h.Typeflag = tar.TypeReg
		if e.Source == "" {
			h.Size = int64(len(e.Data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err := tw.Write(e.Data)
			return err
		}
		return writeHostFile(tw, h, e.Source)
	default:
		return fmt.Errorf("unknown kind %d", e.Kind)
	}
}

func writeHostFile(tw *tar.Writer, h *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	h.Size = fi.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if n != h.Size {
		return fmt.Errorf("%s changed size while read (%d of %d bytes)", src, n, h.Size)
	}
	return nil
}

// writeGzipLayer writes entries as a gzip-compressed tarball to the file
// dst. The gzip header carries no name and no time, so the bytes depend only
// on the entries (and the Go release's compress/flate).
func writeGzipLayer(dst string, entries []Entry) (err error) {
	return writeFileAtomic(dst, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		if err := WriteTar(zw, entries); err != nil {
			return err
		}
		return zw.Close()
	})
}

// writeFileAtomic writes dst through a temporary file in the same directory
// and renames it into place, so dst is either absent or complete.
func writeFileAtomic(dst string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating %s: %w", dst, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("renaming into %s: %w", dst, err)
	}
	return nil
}
