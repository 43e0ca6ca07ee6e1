package certfile

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// KeyPair is a certificate and its private key from PEM files, reloaded
// when they change.
type KeyPair struct {
	src source[*tls.Certificate]
}

// NewKeyPair loads certFile and keyFile, which may be one file holding
// both (the kubelet's kubelet-client-current.pem). The label in logs and
// metrics is certFile.
func NewKeyPair(certFile, keyFile string, o Options) (*KeyPair, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("certfile: a key pair needs a certificate file and a key file")
	}
	paths := []string{certFile}
	if keyFile != certFile {
		paths = append(paths, keyFile)
	}
	k := &KeyPair{src: source[*tls.Certificate]{paths: paths, label: certFile, what: "certificate", parse: parseKeyPair, opts: o}}
	if err := k.src.load(); err != nil {
		return nil, err
	}
	return k, nil
}

// parseKeyPair reads the certificate chain of the first file and the key
// of the last (the same file when there is one), checking they match.
func parseKeyPair(contents [][]byte) (parsed[*tls.Certificate], error) {
	certPEM, keyPEM := contents[0], contents[len(contents)-1]
	// tls.X509KeyPair reads as many blocks as decode: a chain cut short
	// would load as a shorter chain.
	for _, c := range contents {
		if _, err := blocks(c); err != nil {
			return parsed[*tls.Certificate]{}, err
		}
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return parsed[*tls.Certificate]{}, fmt.Errorf("key pair: %w", err)
	}
	// X509KeyPair fills Leaf since Go 1.23.
	return parsed[*tls.Certificate]{val: &c, notAfter: c.Leaf.NotAfter}, nil
}

// Current returns the certificate in use, after a look at the files unless
// one happened less than Options.MinCheckInterval ago. The pointer stays
// the same until new content is taken into use.
func (k *KeyPair) Current() *tls.Certificate { return k.src.current() }

// Check looks at the files now and reports whether a new certificate was
// taken into use.
func (k *KeyPair) Check() bool { return k.src.Check() }

// File is the certificate file: the label in logs and metrics.
func (k *KeyPair) File() string { return k.src.label }

// GetCertificate is tls.Config.GetCertificate: the current certificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Current(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate: the current
// certificate.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Current(), nil
}
