package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// member is what a test compares of a tar member.
type member struct {
	Name, Link, Data string
	Type             byte
	Mode             int64
	Uid, Gid         int
	Uname, Gname     string
	ModTime          int64
	PAX              map[string]string
}

func readTar(t *testing.T, b []byte) []member {
	t.Helper()
	var out []member
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %s: %v", h.Name, err)
		}
		out = append(out, member{Name: h.Name, Link: h.Linkname, Data: string(data), Type: h.Typeflag,
			Mode: h.Mode, Uid: h.Uid, Gid: h.Gid, Uname: h.Uname, Gname: h.Gname, ModTime: h.ModTime.Unix(),
			PAX: h.PAXRecords})
	}
}

func writeTar(t *testing.T, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTar(&buf, entries); err != nil {
		t.Fatalf("WriteTar: %v", err)
	}
	return buf.Bytes()
}

func TestWriteTar(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host")
	if err := os.WriteFile(host, []byte("from host"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		entries []Entry
		want    []member
	}{{
		name: "parents added, sorted, owners and times fixed",
		entries: []Entry{
			HostFile("/usr/local/bin/tool", 0o755, host),
			File("etc/passwd", 0o644, []byte("root:x:0:0::/:/bin/sh\n")),
			Dir("tmp", 0o1777),
			Symlink("bin/sh", "busybox"),
			{Path: "home/nonroot", Kind: KindDir, Mode: 0o700, Uid: 65532, Gid: 65532},
		},
		want: []member{
			{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "bin/sh", Type: tar.TypeSymlink, Mode: 0o777, Link: "busybox"},
			{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Data: "root:x:0:0::/:/bin/sh\n"},
			{Name: "home/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "home/nonroot/", Type: tar.TypeDir, Mode: 0o700, Uid: 65532, Gid: 65532},
			{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
			{Name: "usr/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "usr/local/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "usr/local/bin/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "usr/local/bin/tool", Type: tar.TypeReg, Mode: 0o755, Data: "from host"},
		},
	}, {
		name:    "explicit parent keeps its mode",
		entries: []Entry{File("a/b", 0o600, nil), Dir("a/", 0o700)},
		want: []member{
			{Name: "a/", Type: tar.TypeDir, Mode: 0o700},
			{Name: "a/b", Type: tar.TypeReg, Mode: 0o600},
		},
	}, {
		name:    "a sibling that sorts between a parent and its child",
		entries: []Entry{File("a/b", 0o644, nil), File("a-c", 0o644, nil)},
		want: []member{
			{Name: "a/", Type: tar.TypeDir, Mode: 0o755},
			{Name: "a-c", Type: tar.TypeReg, Mode: 0o644},
			{Name: "a/b", Type: tar.TypeReg, Mode: 0o644},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readTar(t, writeTar(t, tt.entries))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteTarSameBytesAnyOrder(t *testing.T) {
	entries := []Entry{
		File("b", 0o644, []byte("b")), Dir("d", 0o755), File("d/x", 0o600, []byte("x")),
		Symlink("l", "b"), File("a", 0o644, []byte("a")),
	}
	want := writeTar(t, entries)
	reversed := make([]Entry, len(entries))
	for i, e := range entries {
		reversed[len(entries)-1-i] = e
	}
	// A host file's own mtime and owner must not leak into the tarball.
	host := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(host, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(host, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	for i, e := range reversed {
		if e.Path == "d/x" {
			reversed[i] = HostFile("d/x", 0o600, host)
		}
	}
	if got := writeTar(t, reversed); !bytes.Equal(want, got) {
		t.Errorf("WriteTar of the same entries in another order gave different bytes")
	}
}

func TestWriteTarErrors(t *testing.T) {
	tests := []struct {
		name    string
		entries []Entry
	}{
		{"duplicate", []Entry{File("a", 0o644, nil), File("/a", 0o644, nil)}},
		{"escapes the root", []Entry{File("../etc/passwd", 0o644, nil)}},
		{"the root itself", []Entry{Dir("/", 0o755)}},
		{"parent is a file", []Entry{File("a", 0o644, nil), File("a/b", 0o644, nil)}},
		{"missing host file", []Entry{HostFile("a", 0o644, filepath.Join(t.TempDir(), "absent"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := WriteTar(io.Discard, tt.entries); err == nil {
				t.Errorf("WriteTar(%v) succeeded, want an error", tt.entries)
			}
		})
	}
}

func TestNormalizeTar(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	when := time.Date(2025, 5, 20, 1, 2, 3, 0, time.UTC)
	add := func(h *tar.Header, data string) {
		h.ModTime, h.AccessTime, h.ChangeTime = when, when, when
		h.Size = int64(len(data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "./dev/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	add(&tar.Header{Name: "./dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}, "")
	add(&tar.Header{Name: "./etc/resolv.conf", Typeflag: tar.TypeReg, Mode: 0o644}, "nameserver 10.0.0.1\n")
	add(&tar.Header{Name: "./usr/bin/ping", Typeflag: tar.TypeReg, Mode: 0o755, Uname: "root", Gname: "root",
		PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02", "comment": "x"}}, "elf")
	add(&tar.Header{Name: "./usr/bin/ping6", Typeflag: tar.TypeLink, Linkname: "./usr/bin/ping"}, "")
	add(&tar.Header{Name: "./var/mail/", Typeflag: tar.TypeDir, Mode: 0o2775, Gid: 8, Gname: "mail"}, "")
	add(&tar.Header{Name: "./var/cache/apt/archives/x.deb", Typeflag: tar.TypeReg, Mode: 0o644}, "deb")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := NormalizeTar(&out, bytes.NewReader(in.Bytes()), dropFromRootfs); err != nil {
		t.Fatalf("NormalizeTar: %v", err)
	}
	want := []member{
		{Name: "dev/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "usr/bin/ping", Type: tar.TypeReg, Mode: 0o755, Data: "elf",
			PAX: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02"}},
		{Name: "usr/bin/ping6", Type: tar.TypeLink, Link: "usr/bin/ping"},
		{Name: "var/mail/", Type: tar.TypeDir, Mode: 0o2775, Gid: 8},
	}
	if diff := cmp.Diff(want, readTar(t, out.Bytes())); diff != "" {
		t.Errorf("normalized members (-want +got):\n%s", diff)
	}
}

func TestNormalizeTarHardLinkToDropped(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for _, h := range []*tar.Header{
		{Name: "./var/cache/apt/a", Typeflag: tar.TypeReg, Mode: 0o644},
		{Name: "./usr/b", Typeflag: tar.TypeLink, Linkname: "./var/cache/apt/a"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := NormalizeTar(io.Discard, &in, dropFromRootfs); err == nil {
		t.Error("NormalizeTar kept a hard link to a dropped member")
	}
}
