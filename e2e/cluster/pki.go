package cluster

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/internal/testca"
)

// authority is a throwaway certificate authority whose files live in dir.
type authority struct {
	dir      string
	ca       *testca.CA
	CertFile string
	KeyFile  string
}

// newAuthority creates a CA named name, valid for ten years, writing
// <name>.crt and <name>.key.
func newAuthority(dir, name string) (*authority, error) {
	ca, err := testca.New(name, 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	key, err := ca.KeyPEM()
	if err != nil {
		return nil, fmt.Errorf("ca %s: %w", name, err)
	}
	a := &authority{dir: dir, ca: ca, CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	if err := writeKeyPair(a.CertFile, a.KeyFile, ca.CertPEM(), key); err != nil {
		return nil, err
	}
	return a, nil
}

// leaf describes a certificate to issue.
type leaf struct {
	name   string // file base name
	cn     string
	orgs   []string
	dns    []string
	ips    []net.IP
	server bool
	client bool
}

// issue signs l, valid for a year, and writes <name>.crt and <name>.key;
// it returns their paths.
func (a *authority) issue(l leaf) (certFile, keyFile string, err error) {
	tmpl := x509.Certificate{
		Subject:     pkix.Name{CommonName: l.cn, Organization: l.orgs},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:    l.dns,
		IPAddresses: l.ips,
	}
	if l.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	cert, key, err := a.ca.Issue(tmpl, 365*24*time.Hour)
	if err != nil {
		return "", "", fmt.Errorf("issue %s: %w", l.name, err)
	}
	certFile, keyFile = filepath.Join(a.dir, l.name+".crt"), filepath.Join(a.dir, l.name+".key")
	return certFile, keyFile, writeKeyPair(certFile, keyFile, cert, key)
}

// writeKeyPair writes a certificate (readable by all) and its key (by
// the owner only), both PEM.
func writeKeyPair(certFile, keyFile string, cert, key []byte) error {
	if err := os.WriteFile(certFile, cert, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certFile, err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", keyFile, err)
	}
	return nil
}

// writeServiceAccountKey writes the RSA key pair that signs and verifies
// service-account tokens (kube-apiserver wants RSA or ECDSA in PEM).
func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("service-account key: %w", err)
	}
	keyFile, pubFile = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", fmt.Errorf("service-account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return "", "", fmt.Errorf("service-account key: %w", err)
	}
	return keyFile, pubFile, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
