package cachetest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Versions here are test stand-ins with the properties the servers rely on
// (deterministic, content-addressed); the compute side defines the real
// hashes.

// versionBytes is how many bytes of a SHA-256 a version keeps (hex encoded).
const versionBytes = 16

// systemVersion hashes a node view's (name, version) pairs in name order.
func systemVersion(nv cache.NodeView) string {
	h := sha256.New()
	nv.Range(func(v *cache.View) bool {
		// Length prefixes keep the encoding unambiguous.
		writeString(h, v.Name)
		writeString(h, v.Version)
		return true
	})
	return hex.EncodeToString(h.Sum(nil)[:versionBytes])
}

func writeString(h hash.Hash, s string) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	h.Write([]byte(s))
}

// contentVersion hashes the deterministic encoding of a resource's body.
func contentVersion(r *switchyardv1.Resource) (string, error) {
	b, err := marshal.Marshal(&switchyardv1.Resource{Body: r.GetBody()})
	if err != nil {
		return "", fmt.Errorf("version of %q: %w", r.GetName(), err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:versionBytes]), nil
}
