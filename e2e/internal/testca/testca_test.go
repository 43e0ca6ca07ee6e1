package testca

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"
	"time"
)

// TestIssueChainsToCA: an issued pair loads as a TLS key pair and
// verifies against the CA for its usage, with the defaults Issue fills.
func TestIssueChainsToCA(t *testing.T) {
	ca, err := New("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.KeyPEM(); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(x509.Certificate{
		Subject:     pkix.Name{CommonName: "leaf"},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.KeyUsage != x509.KeyUsageDigitalSignature || leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("key usage %v, serial %v: want DigitalSignature and a positive serial", leaf.KeyUsage, leaf.SerialNumber)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("leaf does not verify against the CA: %v", err)
	}
}
