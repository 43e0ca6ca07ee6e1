package servertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority that signs the server and
// client certificates of one test. Its certificates are valid from an hour
// ago to an hour on, so clock skew never matters.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// Pool trusts Cert alone.
	Pool   *x509.CertPool
	serial atomic.Int64 // the latest serial number given
}

// NewCA returns a new CA with a P-256 key.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "switchyard test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("parse CA certificate: %v", err)
	}
	ca := &CA{Cert: cert, Key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.serial.Store(1)
	return ca
}

// Leaf is what a certificate the CA issues names and is for.
type Leaf struct {
	CN    string
	Orgs  []string // the subject's organizations: Kubernetes groups
	DNS   []string
	IPs   []net.IP
	Usage x509.ExtKeyUsage
}

// Issue signs a certificate for l with a new key.
func (ca *CA) Issue(t testing.TB, l Leaf) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial.Add(1)), Subject: pkix.Name{CommonName: l.CN, Organization: l.Orgs},
		DNSNames: l.DNS, IPAddresses: l.IPs, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{l.Usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("issue %q: %v", l.CN, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// WriteCA writes the CA's certificate to dir/ca.crt, as a --ca-file holds
// it.
func (ca *CA) WriteCA(t testing.TB, dir string) {
	t.Helper()
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", ca.Cert.Raw)
}

// WriteLeaf writes c, one the CA issued, to dir/name.crt and its key to
// dir/name.key, as --cert-file and --key-file hold them.
func WriteLeaf(t testing.TB, dir, name string, c tls.Certificate) {
	t.Helper()
	key, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("%s: key %T is not one the CA made", name, c.PrivateKey)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("marshal %s's key: %v", name, err)
	}
	writePEM(t, filepath.Join(dir, name+".crt"), "CERTIFICATE", c.Certificate[0])
	writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
