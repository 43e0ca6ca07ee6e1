package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations on the image's entry in the archive's index.json. containerd
// (`ctr images import`) names the image after io.containerd.image.name;
// other tools (skopeo, podman) read the OCI ref.name.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerName = "io.containerd.image.name"
)

// keyVersion changes whenever the way an image is assembled from the same
// inputs changes, so no archive of an older scheme is reused.
const keyVersion = "switchyard-images/v1"

// defaultPath is the PATH of every image's environment.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// imageSpec is everything an image is made of: a reference, a runtime
// configuration and its layers, bottom first.
type imageSpec struct {
	name   string // short name
	ref    string
	config v1.Config
	layers []layerSpec
}

// layerSpec is one layer: either entries WriteTar turns into a tarball, or a
// ready gzip-compressed tarball (a cached rootfs).
type layerSpec struct {
	entries   []Entry
	gzipped   string
	createdBy string // the layer's history line
}

// key is a hash of everything the archive's bytes depend on: the
// reference, the configuration, each layer's uncompressed tarball (or the
// compressed file's bytes) and keyVersion.
func (s imageSpec) key() (string, error) {
	h := sha256.New()
	cfg, err := json.Marshal(s.config)
	if err != nil {
		return "", fmt.Errorf("encoding config: %w", err)
	}
	fmt.Fprintf(h, "%s\nref %s\nconfig %s\n", keyVersion, s.ref, cfg)
	for _, l := range s.layers {
		lh := sha256.New()
		if l.gzipped != "" {
			if err := hashFile(lh, l.gzipped); err != nil {
				return "", err
			}
		} else if err := WriteTar(lh, l.entries); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "layer %x %q\n", lh.Sum(nil), l.createdBy)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("hashing: %w", err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		return fmt.Errorf("hashing %s: %w", p, err)
	}
	return nil
}

// image assembles the spec's v1.Image, writing the layers given as entries
// into gzip files under workDir.
func (s imageSpec) image(workDir string) (v1.Image, error) {
	adds := make([]mutate.Addendum, 0, len(s.layers))
	for i, l := range s.layers {
		file := l.gzipped
		if file == "" {
			file = filepath.Join(workDir, fmt.Sprintf("layer-%d.tar.gz", i))
			if err := writeGzipLayer(file, l.entries); err != nil {
				return nil, err
			}
		}
		layer, err := tarball.LayerFromFile(file, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", file, err)
		}
		adds = append(adds, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{CreatedBy: l.createdBy},
		})
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, fmt.Errorf("appending layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Created = v1.Time{}
	cf.Config = s.config
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting config: %w", err)
	}
	return img, nil
}

// writeArchive assembles the image and writes it as an OCI archive (a tar
// of an OCI image layout holding one image whose index entry carries the
// reference) to dst, atomically. It returns the manifest digest.
func (s imageSpec) writeArchive(workDir, dst string) (string, error) {
	img, err := s.image(workDir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(workDir, "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", fmt.Errorf("writing OCI layout: %w", err)
	}
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{annotationRefName: s.ref, annotationContainerName: s.ref}),
		layout.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		return "", fmt.Errorf("writing OCI layout: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("manifest digest: %w", err)
	}
	entries, err := dirEntries(dir)
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(dst, func(w io.Writer) error { return WriteTar(w, entries) }); err != nil {
		return "", err
	}
	return digest.String(), nil
}

// dirEntries lists the regular files and directories under dir as entries
// with modes 0644 and 0755.
func dirEntries(dir string) ([]Entry, error) {
	var entries []Entry
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			entries = append(entries, Dir(rel, 0o755))
		case d.Type().IsRegular():
			entries = append(entries, HostFile(rel, 0o644, p))
		default:
			return fmt.Errorf("%s: not a regular file or directory", p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	return entries, nil
}
