package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ImageID is the digest of the archive's image config, read from the
// archive: what a kubelet on containerd reports as a container's imageID
// (status.containerStatuses[].imageID) for an image imported without a
// registry, where there is no repository digest to report instead. It
// tells which build a pod runs when two builds share a tag.
func (a Archive) ImageID() (string, error) {
	hexDigest, ok := strings.CutPrefix(a.Digest, "sha256:")
	if !ok {
		return "", fmt.Errorf("%s: manifest digest %q is not sha256", a.Path, a.Digest)
	}
	f, err := os.Open(a.Path)
	if err != nil {
		return "", fmt.Errorf("image id: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: no manifest blob %s", a.Path, a.Digest)
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", a.Path, err)
		}
		if h.Name != "blobs/sha256/"+hexDigest {
			continue
		}
		m, err := v1.ParseManifest(tr)
		if err != nil {
			return "", fmt.Errorf("%s: manifest %s: %w", a.Path, a.Digest, err)
		}
		return m.Config.Digest.String(), nil
	}
}
