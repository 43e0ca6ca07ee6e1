package certfile

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// errTrailing is a file whose end is not PEM: a write cut short, or
// garbage after the blocks.
var errTrailing = errors.New("bytes after the last PEM block are not PEM (a write cut short?)")

// blocks decodes every PEM block of data; anything but whitespace that
// is not a complete block is an error, so that a file cut short in its
// last block is rejected rather than read as one block less.
func blocks(data []byte) ([]*pem.Block, error) {
	var out []*pem.Block
	rest := data
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		out = append(out, b)
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errTrailing
	}
	return out, nil
}

// certificates parses every CERTIFICATE block of data, skipping blocks of
// other types (a key beside the certificate); none is an error.
func certificates(data []byte) ([]*x509.Certificate, error) {
	bs, err := blocks(data)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for i, b := range bs {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", i+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errNoCertificate
	}
	return certs, nil
}
