package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// dropFromRootfs says which members of a Debian rootfs tarball an image
// leaves out: the runtime supplies /dev, /etc/resolv.conf and /etc/hostname
// (mmdebstrap copies the build host's, which are neither wanted nor
// reproducible), and apt's caches and package lists only make it bigger.
// The directories themselves stay.
func dropFromRootfs(name string) bool {
	switch name {
	case "etc/resolv.conf", "etc/hostname":
		return true
	}
	for _, dir := range []string{"dev/", "var/cache/apt/", "var/lib/apt/lists/"} {
		if strings.HasPrefix(name, dir) {
			return true
		}
	}
	return false
}

// NormalizeTar copies the tar stream r to w in the same order, giving every
// member mtime 0 and no access/change times or user/group names, and
// leaving out the members drop matches (names are compared without a
// leading "./" or "/", directories without their trailing "/"). Numeric
// ownership, modes, link targets and xattrs are kept; other PAX records
// are not. The root directory member is dropped. A hard link to a dropped
// member is an error.
func NormalizeTar(w io.Writer, r io.Reader, drop func(name string) bool) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	kept := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading tar: %w", err)
		}
		name := memberName(h.Name)
		if name == "" || drop(name) {
			continue
		}
		out := &tar.Header{
			Typeflag: h.Typeflag,
			Name:     name,
			Mode:     h.Mode,
			Uid:      h.Uid,
			Gid:      h.Gid,
			Size:     h.Size,
			ModTime:  epoch,
			Devmajor: h.Devmajor,
			Devminor: h.Devminor,
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out.Name += "/"
		case tar.TypeLink:
			target := memberName(h.Linkname)
			if !kept[target] {
				return fmt.Errorf("tar member %s: hard link to %q, which is dropped or comes later", name, h.Linkname)
			}
			out.Linkname = target
		case tar.TypeSymlink:
			out.Linkname = h.Linkname
		}
		for k, v := range h.PAXRecords {
			if strings.HasPrefix(k, "SCHILY.xattr.") {
				if out.PAXRecords == nil {
					out.PAXRecords = map[string]string{}
				}
				out.PAXRecords[k] = v
			}
		}
		if err := tw.WriteHeader(out); err != nil {
			return fmt.Errorf("tar member %s: %w", name, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("tar member %s: %w", name, err)
			}
		}
		kept[name] = true
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("closing tar: %w", err)
	}
	return nil
}

// memberName is a tar member's name without "./", "/" or a trailing "/";
// "" for the root.
func memberName(n string) string {
	c := path.Clean("/" + n)
	return strings.TrimPrefix(c, "/")
}
