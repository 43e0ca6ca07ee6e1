package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestTLS runs the command with --ca-file, --cert-file and --key-file
// against a scripted control plane serving TLS, so the credentials are
// built by the same code as in production (transportCredentials).
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "switchyard-ca")
	other := newCA(t, "other-ca")
	caFile := writePEM(t, dir, "ca.pem", ca.certPEM)
	nodeCert, nodeKey := ca.issue(t, "node-a", x509.ExtKeyUsageClientAuth, []string{"node-a"}, nil)
	certFile := writePEM(t, dir, "node-a.pem", nodeCert)
	keyFile := writePEM(t, dir, "node-a-key.pem", nodeKey)
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}

	t.Run("mTLS connects, applies and ACKs", func(t *testing.T) {
		hs := &handshakes{}
		cp := cptest.New(t, cptest.WithTLS(hs.serverConfig(t, ca.serverCert(t, loopback), ca.pool())))
		ag := startAgent(t, cp, "--ca-file", caFile, "--cert-file", certFile, "--key-file", keyFile)

		first := cp.Next()
		if first.GetNode().GetName() != "node-a" {
			t.Fatalf("first request = %v", first)
		}
		info, ok := first.Peer.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.VerifiedChains) == 0 {
			t.Fatalf("stream is not mutually authenticated: peer %+v", first.Peer)
		}
		if got := info.State.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != first.GetNode().GetName() {
			t.Errorf("client certificate DNS SANs = %v, want [%s] (the node name)", got, first.GetNode().GetName())
		}
		cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s1", Nonce: "n1", Resources: []*switchyardv1.Resource{{
			Name: "ns/web", Version: "1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.1"}}},
		}}})
		if r := cp.Next(); r.GetAppliedVersion() != "s1" || r.GetErrorDetail() != nil {
			t.Fatalf("ACK = %v", r)
		}
		if !strings.Contains(ag.stdout.String(), "service ns/web") {
			t.Errorf("dry-run output lacks the service:\n%s", ag.stdout.String())
		}
		ag.stop(t)
	})

	t.Run("CA only against a server requiring client certificates", func(t *testing.T) {
		hs := &handshakes{}
		cp := cptest.New(t, cptest.WithTLS(hs.serverConfig(t, ca.serverCert(t, loopback), ca.pool())))
		ag := startAgent(t, cp, "--ca-file", caFile)
		ag.refused(t, cp, hs, "certificate required")
	})

	t.Run("server certificate from another CA", func(t *testing.T) {
		hs := &handshakes{}
		cp := cptest.New(t, cptest.WithTLS(hs.serverConfig(t, other.serverCert(t, loopback), ca.pool())))
		ag := startAgent(t, cp, "--ca-file", caFile, "--cert-file", certFile, "--key-file", keyFile)
		ag.refused(t, cp, hs, "certificate signed by unknown authority")
	})
}

// agentRun is the command running in the background.
type agentRun struct {
	stdout, stderr runtest.Buffer
	stateDir       string
	cancel         context.CancelFunc
	done           chan error
}

func startAgent(t *testing.T, cp *cptest.Server, tlsArgs ...string) *agentRun {
	t.Helper()
	ag := &agentRun{stateDir: t.TempDir(), done: make(chan error, 1)}
	ag.start(t, append([]string{"--control-plane", cp.Addr()}, tlsArgs...)...)
	return ag
}

// start runs the command in dry-run mode on ag's state dir with args
// added.
func (ag *agentRun) start(t *testing.T, args ...string) {
	t.Helper()
	args = append([]string{"--mode", "dry-run", "--node-name", "node-a",
		"--state-dir", ag.stateDir, "--healthz-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
		"--min-sync-period", "0s"}, args...)
	ctx, cancel := context.WithCancel(t.Context())
	ag.cancel = cancel
	go func() { ag.done <- run(ctx, args, &ag.stdout, &ag.stderr) }()
	t.Cleanup(cancel)
}

// stop is SIGTERM; run must return nil.
func (ag *agentRun) stop(t *testing.T) {
	t.Helper()
	ag.cancel()
	select {
	case err := <-ag.done:
		if err != nil {
			t.Errorf("run: %v\n%s", err, ag.stderr.String())
		}
	case <-time.After(cptest.Timeout):
		t.Fatal("run did not return after shutdown")
	}
}

// refused checks that the agent never gets a stream: at least three TLS
// handshakes, spaced by the reconnect backoff, each failing with wantErr
// in the agent's log, and nothing applied or persisted.
func (ag *agentRun) refused(t *testing.T, cp *cptest.Server, hs *handshakes, wantErr string) {
	t.Helper()
	const attempts = 3
	runtest.Eventually(t, "three handshake attempts", func() bool { return hs.count() >= attempts })
	runtest.Eventually(t, "the handshake error in the agent's log", func() bool { return strings.Contains(ag.stderr.String(), wantErr) })
	ag.stop(t)

	at := hs.times()
	t.Logf("%d handshakes refused; agent log:\n%s", len(at), ag.stderr.String())
	for i := 1; i < len(at); i++ {
		// The first reconnect waits in [250ms, 500ms): the default backoff.
		if gap := at[i].Sub(at[i-1]); gap < 200*time.Millisecond {
			t.Errorf("handshake %d came %v after the previous one: no backoff (all: %v)", i+1, gap, at)
		}
	}
	if n := cp.Streams(); n != 0 {
		t.Errorf("server accepted %d streams, want 0", n)
	}
	cp.NoRequest()
	if out := ag.stdout.String(); out != "" {
		t.Errorf("the agent applied something:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(ag.stateDir, persist.FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("persisted view: stat err = %v, want not exist", err)
	}
	if !strings.Contains(ag.stderr.String(), "retryIn=") {
		t.Errorf("agent log lacks the retry wait:\n%s", ag.stderr.String())
	}
}

// handshakes records when the server saw a TLS ClientHello.
type handshakes struct {
	mu sync.Mutex
	at []time.Time
}

func (h *handshakes) serverConfig(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	t.Helper()
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			h.mu.Lock()
			h.at = append(h.at, time.Now())
			h.mu.Unlock()
			return nil, nil // keep this config
		},
	}
}

func (h *handshakes) count() int { return len(h.times()) }

func (h *handshakes) times() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Time(nil), h.at...)
}

// testCA is a throw-away certificate authority.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	cert, certPEM, key := sign(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, nil)
	return &testCA{cert: cert, key: key, certPEM: certPEM}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// issue signs a leaf certificate and returns it and its key as PEM.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte) {
	t.Helper()
	_, certPEM, key := sign(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, ca)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// serverCert issues a serving certificate for ips.
func (ca *testCA) serverCert(t *testing.T, ips []net.IP) tls.Certificate {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, "switchyard-controlplane", x509.ExtKeyUsageServerAuth, nil, ips)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// sign gives tmpl a new key, a serial and validity from an hour ago to
// an hour ahead, and signs it as issuer (nil: tmpl signs itself, a
// CA's root). It returns the certificate, parsed and as PEM, and its key.
func sign(t *testing.T, tmpl *x509.Certificate, issuer *testCA) (*x509.Certificate, []byte, *ecdsa.PrivateKey) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	parent, parentKey := tmpl, key
	if issuer != nil {
		parent, parentKey = issuer.cert, issuer.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
