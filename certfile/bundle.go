package certfile

import (
	"crypto/x509"
	"errors"
)

// Bundle is a set of CA certificates from one PEM file, reloaded when it
// changes. During a CA rotation it holds the old and the new CA, then the
// new one only.
type Bundle struct {
	src source[*x509.CertPool]
}

// NewBundle loads file.
func NewBundle(file string, o Options) (*Bundle, error) {
	if file == "" {
		return nil, errors.New("certfile: a CA bundle needs a file")
	}
	b := &Bundle{src: source[*x509.CertPool]{paths: []string{file}, label: file, what: "CA bundle", parse: parseBundle, opts: o}}
	if err := b.src.load(); err != nil {
		return nil, err
	}
	return b, nil
}

// parseBundle reads every certificate; the bundle expires with its first
// certificate to expire, when verification by that CA starts failing.
func parseBundle(contents [][]byte) (parsed[*x509.CertPool], error) {
	certs, err := certificates(contents[0])
	if err != nil {
		return parsed[*x509.CertPool]{}, err
	}
	pool := x509.NewCertPool()
	notAfter := certs[0].NotAfter
	for _, c := range certs {
		pool.AddCert(c)
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	return parsed[*x509.CertPool]{val: pool, notAfter: notAfter}, nil
}

// Pool returns the CA certificates in use, after a look at the file
// unless one happened less than Options.MinCheckInterval ago. The pointer
// stays the same until new content is taken into use; the pool must not
// be modified.
func (b *Bundle) Pool() *x509.CertPool { return b.src.current() }

// Check looks at the file now and reports whether a new bundle was taken
// into use.
func (b *Bundle) Check() bool { return b.src.Check() }

// File is the bundle's file: the label in logs and metrics.
func (b *Bundle) File() string { return b.src.label }
