package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
)

// pki is a throwaway CA and the TLS configs the mTLS tests build from it.
type pki struct {
	*servertest.CA
	t *testing.T
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	return &pki{CA: servertest.NewCA(t), t: t}
}

// serverTLS is an mTLS server config for 127.0.0.1.
func (p *pki) serverTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Issue(p.t, servertest.Leaf{CN: "controlplane",
			IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Usage: x509.ExtKeyUsageServerAuth})},
		ClientCAs:  p.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS13,
	}
}

// clientTLS is a client config presenting a certificate with cn and dns.
func (p *pki) clientTLS(cn string, dns ...string) *tls.Config {
	return p.client(servertest.Leaf{CN: cn, DNS: dns})
}

// operatorTLS is a client config presenting a certificate with cn in the
// organizations orgs.
func (p *pki) operatorTLS(cn string, orgs ...string) *tls.Config {
	return p.client(servertest.Leaf{CN: cn, Orgs: orgs})
}

func (p *pki) client(l servertest.Leaf) *tls.Config {
	l.Usage = x509.ExtKeyUsageClientAuth
	return &tls.Config{
		Certificates: []tls.Certificate{p.Issue(p.t, l)},
		RootCAs:      p.Pool,
		MinVersion:   tls.VersionTLS13,
	}
}
