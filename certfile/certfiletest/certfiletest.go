package certfiletest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a throwaway certificate authority with a P-256 key, valid from an
// hour ago to a day on.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA returns a new CA named cn.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("certfiletest: create CA %s: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certfiletest: parse CA %s: %v", cn, err)
	}
	return &CA{Cert: cert, Key: key}
}

// PEM is the CA's certificate as PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Bundle is the PEM of the CAs' certificates, in order: a trust bundle.
func Bundle(cas ...*CA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.PEM()...)
	}
	return b
}

// Leaf is what an issued certificate names and is for.
type Leaf struct {
	CN    string
	DNS   []string
	IPs   []net.IP
	Usage x509.ExtKeyUsage
	// NotAfter is an hour on when zero.
	NotAfter time.Time
}

// Issued is a certificate the CA signed and its new key.
type Issued struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Combined is the certificate then the key in one PEM file, as the
// kubelet's kubelet-client-current.pem holds them.
func (i Issued) Combined() []byte {
	return append(append([]byte(nil), i.CertPEM...), i.KeyPEM...)
}

// Issue signs a certificate for l with a new P-256 key.
func (ca *CA) Issue(t testing.TB, l Leaf) Issued {
	t.Helper()
	key := newKey(t)
	notAfter := l.NotAfter
	if notAfter.IsZero() {
		notAfter = time.Now().Add(time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: l.CN}, DNSNames: l.DNS, IPAddresses: l.IPs,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{l.Usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("certfiletest: issue %s: %v", l.CN, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("certfiletest: parse %s: %v", l.CN, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("certfiletest: encode the key of %s: %v", l.CN, err)
	}
	return Issued{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// versions numbers the files and directories this package writes, so
// that each write is a new file.
var versions atomic.Int64

// RotateLink writes data to a new file beside path, then swaps path (a
// symlink, or nothing yet) onto it with a rename, as the kubelet rotates
// kubelet-client-current.pem: a reader sees the old file or the new one,
// never a part.
func RotateLink(t testing.TB, path string, data []byte) {
	t.Helper()
	n := versions.Add(1)
	target := fmt.Sprintf("%s.%d", path, n)
	if err := os.WriteFile(target, data, 0o600); err != nil {
		t.Fatalf("certfiletest: %v", err)
	}
	swapLink(t, filepath.Base(target), path)
}

// WriteVolume writes files into dir as the kubelet updates a Secret or
// ConfigMap volume: a new ..<n> directory holding them, the ..data
// symlink swapped onto it with a rename, and each name a symlink
// ..data/<name>. It returns the paths of the files, by name.
func WriteVolume(t testing.TB, dir string, files map[string][]byte) map[string]string {
	t.Helper()
	n := versions.Add(1)
	ts := fmt.Sprintf("..%d", n)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatalf("certfiletest: %v", err)
	}
	paths := map[string]string{}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), data, 0o600); err != nil {
			t.Fatalf("certfiletest: %v", err)
		}
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), p); err != nil {
				t.Fatalf("certfiletest: %v", err)
			}
		}
		paths[name] = p
	}
	swapLink(t, ts, filepath.Join(dir, "..data"))
	return paths
}

// WriteInPlace rewrites path's file itself, as a careless writer would:
// readers may see it half written.
func WriteInPlace(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatalf("certfiletest: %v", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		t.Fatalf("certfiletest: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("certfiletest: %v", err)
	}
}

// swapLink points link at target with a rename of a new symlink.
func swapLink(t testing.TB, target, link string) {
	t.Helper()
	tmp := fmt.Sprintf("%s.tmp%d", link, versions.Add(1))
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatalf("certfiletest: %v", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatalf("certfiletest: %v", err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("certfiletest: generate key: %v", err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatalf("certfiletest: serial: %v", err)
	}
	return n
}
