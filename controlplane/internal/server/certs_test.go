package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// pki is a throwaway CA that issues server and client certificates.
type pki struct {
	t      *testing.T
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "switchyard test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &pki{t: t, cert: cert, key: key, pool: pool, serial: 1}
}

// issue signs a leaf certificate.
func (p *pki) issue(cn string, dns []string, ips []net.IP, usage x509.ExtKeyUsage, orgs ...string) tls.Certificate {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		DNSNames:     dns,
		IPAddresses:  ips,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// serverTLS is an mTLS server config for 127.0.0.1.
func (p *pki) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.issue("controlplane", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth)},
		ClientCAs:    p.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
}

// clientTLS is a client config presenting a certificate with cn and dns.
func (p *pki) clientTLS(cn string, dns ...string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.issue(cn, dns, nil, x509.ExtKeyUsageClientAuth)},
		RootCAs:      p.pool,
		MinVersion:   tls.VersionTLS13,
	}
}

// operatorTLS is a client config presenting a certificate with cn in the
// organizations orgs.
func (p *pki) operatorTLS(cn string, orgs ...string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.issue(cn, nil, nil, x509.ExtKeyUsageClientAuth, orgs...)},
		RootCAs:      p.pool,
		MinVersion:   tls.VersionTLS13,
	}
}
