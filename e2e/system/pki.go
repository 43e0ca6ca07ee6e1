package system

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/internal/testca"
)

// ServerName is the name the control plane's certificate carries. gRPC
// dials a unix:// target with the authority "localhost", which is the name
// a TLS client verifies, so no server-name override is needed on the agent.
const ServerName = "localhost"

// PKI is a throwaway certificate authority and the files the tiers use:
// the control plane's serving certificate (for ServerName) and one client
// certificate per node whose subject is system:node:<node>, the identity
// the control plane's NodeCert authorizer accepts for that node only.
type PKI struct {
	Dir    string
	CAFile string
	// ServerCert and ServerKey are the control plane's PEM files.
	ServerCert, ServerKey string

	ca   *testca.CA
	pool *x509.CertPool
}

// validity is how long the CA and every certificate it issues are valid.
const validity = 24 * time.Hour

// NewPKI creates a CA and a serving certificate under dir.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := testca.New("switchyard-e2e-ca", validity)
	if err != nil {
		return nil, fmt.Errorf("create CA: %w", err)
	}
	p := &PKI{Dir: dir, CAFile: filepath.Join(dir, "ca.pem"), ca: ca, pool: x509.NewCertPool()}
	p.pool.AddCert(ca.Cert)
	if err := os.WriteFile(p.CAFile, ca.CertPEM(), 0o600); err != nil {
		return nil, err
	}
	p.ServerCert, p.ServerKey, err = p.issueFiles("server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "switchyard-controlplane"},
		DNSNames:    []string{ServerName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// NodeFiles issues (or reissues) node's client certificate and returns its
// PEM files.
func (p *PKI) NodeFiles(node string) (cert, key string, err error) {
	return p.issueFiles("node-"+node, nodeTemplate(node))
}

// NodeCert returns a fresh client key pair for node, in memory.
func (p *PKI) NodeCert(node string) (tls.Certificate, error) {
	return p.Issue(nodeTemplate(node))
}

func nodeTemplate(node string) *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// ClientCert returns a client key pair whose subject is cn and names no node.
func (p *PKI) ClientCert(cn string) (tls.Certificate, error) {
	return p.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// AdminGroup is the certificate Organization the control plane's
// AdminService accepts (its --admin-group default).
const AdminGroup = "switchyard:admins"

// OperatorCert returns a client key pair for the operator cn, in
// AdminGroup.
func (p *PKI) OperatorCert(cn string) (tls.Certificate, error) {
	return p.Issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{AdminGroup}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// ClientTLS is the client configuration of an agent or operator presenting
// cert (none when cert is nil).
func (p *PKI) ClientTLS(cert *tls.Certificate) *tls.Config {
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// Issue signs tmpl (subject, names, usages) with a new key.
func (p *PKI) Issue(tmpl *x509.Certificate) (tls.Certificate, error) {
	certPEM, keyPEM, err := p.ca.Issue(*tmpl, validity)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func (p *PKI) issueFiles(name string, tmpl *x509.Certificate) (cert, key string, err error) {
	certPEM, keyPEM, err := p.ca.Issue(*tmpl, validity)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(p.Dir, name+".pem"), filepath.Join(p.Dir, name+"-key.pem")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(key, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	return cert, key, nil
}
