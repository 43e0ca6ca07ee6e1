package certfile_test

import (
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// handshake runs one TLS handshake over a pipe between a client with
// clientCert (nil: none) trusting roots and a server with cfg, and
// returns the serial the client saw, the one the server saw (nil when
// none) and the handshake's error.
func handshake(t *testing.T, cfg *tls.Config, roots *x509.CertPool, clientCert *tls.Certificate) (server, client *big.Int, err error) {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	srv := tls.Server(s, cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	ccfg := &tls.Config{RootCAs: roots, ServerName: "switchyard-controlplane", MinVersion: tls.VersionTLS12}
	if clientCert != nil {
		// Sent whatever CAs the server names, as the agent sends its
		// certificate (Certificates would send none to a server naming
		// other CAs, and the server would not say which).
		ccfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return clientCert, nil }
	}
	cl := tls.Client(c, ccfg)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	cerr := cl.Handshake()
	if cerr == nil {
		// TLS 1.3: the server verifies the client's certificate after the
		// client's handshake returned; a read sees its verdict.
		go func() { _, _ = cl.Read(make([]byte, 1)) }()
	}
	serr := <-done
	if cerr == nil {
		server = cl.ConnectionState().PeerCertificates[0].SerialNumber
	}
	if serr == nil {
		if pc := srv.ConnectionState().PeerCertificates; len(pc) > 0 {
			client = pc[0].SerialNumber
		}
	}
	if cerr != nil {
		return server, client, cerr
	}
	return server, client, serr
}

// TestServerConfig serves with a key pair and a client CA bundle from a
// Secret and a ConfigMap volume: a renewed serving certificate is served
// at the next handshake, and a client CA rotated with an overlapping
// bundle accepts the clients of both CAs, then those of the new only.
func TestServerConfig(t *testing.T) {
	oldCA, newCA := certfiletest.NewCA(t, "old CA"), certfiletest.NewCA(t, "new CA")
	serving := certfiletest.Leaf{CN: "switchyard-controlplane", DNS: []string{"switchyard-controlplane"}, Usage: x509.ExtKeyUsageServerAuth}
	node := certfiletest.Leaf{CN: "system:node:node-a", Usage: x509.ExtKeyUsageClientAuth}
	tlsDir, caDir := t.TempDir(), t.TempDir()
	writeServing := func(c certfiletest.Issued) {
		certfiletest.WriteVolume(t, tlsDir, map[string][]byte{"tls.crt": c.CertPEM, "tls.key": c.KeyPEM})
	}
	writeClientCA := func(b []byte) { certfiletest.WriteVolume(t, caDir, map[string][]byte{"ca.crt": b}) }
	keyPair := func(c certfiletest.Issued) *tls.Certificate {
		kp, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &kp
	}
	first := oldCA.Issue(t, serving)
	writeServing(first)
	writeClientCA(oldCA.PEM())
	clk := clocktesting.NewFakePassiveClock(time.Now())
	opts := certfile.Options{Clock: clk, Logger: testLogger(t)}
	kp, err := certfile.NewKeyPair(filepath.Join(tlsDir, "tls.crt"), filepath.Join(tlsDir, "tls.key"), opts)
	if err != nil {
		t.Fatal(err)
	}
	cas, err := certfile.NewBundle(filepath.Join(caDir, "ca.crt"), opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := certfile.ServerConfig(kp.GetCertificate, cas)
	if cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil {
		t.Fatalf("ClientAuth %v, ClientCAs %v: want client certificates required", cfg.ClientAuth, cfg.ClientCAs)
	}
	oldNode, newNode := keyPair(oldCA.Issue(t, node)), keyPair(newCA.Issue(t, node))
	renewed, reissued := oldCA.Issue(t, serving), newCA.Issue(t, serving)
	// Clients trust both CAs throughout: this test is about the server.
	roots := x509.NewCertPool()
	roots.AddCert(oldCA.Cert)
	roots.AddCert(newCA.Cert)

	for _, s := range []struct {
		name       string
		do         func()
		wantServed *big.Int
		// clients and whether each is accepted
		client     *tls.Certificate
		wantRefuse string
	}{
		{"start", func() {}, first.Cert.SerialNumber, oldNode, ""},
		{"no client certificate", func() {}, first.Cert.SerialNumber, nil, "didn't provide a certificate"},
		{"serving certificate renewed", func() { writeServing(renewed) }, renewed.Cert.SerialNumber, oldNode, ""},
		{"client of the new CA before the bundle has it", func() {}, renewed.Cert.SerialNumber, newNode, "unknown authority"},
		{"client CAs old and new: old client", func() { writeClientCA(certfiletest.Bundle(oldCA, newCA)) }, renewed.Cert.SerialNumber, oldNode, ""},
		{"client CAs old and new: new client", func() {}, renewed.Cert.SerialNumber, newNode, ""},
		{"serving certificate from the new CA", func() { writeServing(reissued) }, reissued.Cert.SerialNumber, newNode, ""},
		{"client CAs new only: new client", func() { writeClientCA(newCA.PEM()) }, reissued.Cert.SerialNumber, newNode, ""},
		{"client CAs new only: old client", func() {}, reissued.Cert.SerialNumber, oldNode, "unknown authority"},
	} {
		s.do()
		clk.SetTime(clk.Now().Add(certfile.DefaultMinCheckInterval)) // the next handshake looks
		served, client, err := handshake(t, cfg, roots, s.client)
		if served == nil || served.Cmp(s.wantServed) != 0 {
			t.Errorf("%s: server presented serial %v, want %v", s.name, served, s.wantServed)
		}
		switch {
		case s.wantRefuse == "" && err != nil:
			t.Errorf("%s: handshake: %v", s.name, err)
		case s.wantRefuse == "" && client.Cmp(s.client.Leaf.SerialNumber) != 0:
			t.Errorf("%s: server saw client serial %v, want %v", s.name, client, s.client.Leaf.SerialNumber)
		case s.wantRefuse != "" && (err == nil || !strings.Contains(err.Error(), s.wantRefuse)):
			t.Errorf("%s: handshake error %v, want %q", s.name, err, s.wantRefuse)
		}
	}
}

// TestServerConfigWithoutClientCAs asks for no client certificate.
func TestServerConfigWithoutClientCAs(t *testing.T) {
	cfg := certfile.ServerConfig(nil, nil)
	if cfg.ClientAuth != tls.NoClientCert || cfg.GetConfigForClient != nil || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("config %+v: want no client authentication, TLS 1.2 at least", cfg)
	}
}
