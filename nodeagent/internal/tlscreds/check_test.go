package tlscreds

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one Source over a kubelet-style client certificate
// (kubelet-client-current.pem, swapped at rotation) and a ConfigMap-style
// CA bundle, with a server to handshake with.
type env struct {
	t        *testing.T
	ca       *certfiletest.CA
	src      *Source
	clk      *clocktesting.FakeClock
	certFile string
	caDir    string
	server   *tls.Config
	// listening makes the reconnect signal received; sent counts them.
	listening bool
	sent      int
	// presentedSerial is the client certificate the server saw last.
	presentedSerial *big.Int
}

var nodeLeaf = certfiletest.Leaf{CN: "system:node:node-a", DNS: []string{"node-a"}, Usage: x509.ExtKeyUsageClientAuth}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ca: certfiletest.NewCA(t, "kubernetes"), clk: clocktesting.NewFakeClock(time.Now()), caDir: t.TempDir()}
	e.certFile = filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	certfiletest.RotateLink(t, e.certFile, e.ca.Issue(t, nodeLeaf).Combined())
	caFile := certfiletest.WriteVolume(t, e.caDir, map[string][]byte{"ca.crt": e.ca.PEM()})["ca.crt"]
	serving := e.ca.Issue(t, certfiletest.Leaf{CN: "switchyard-controlplane", DNS: []string{"switchyard-controlplane"}, Usage: x509.ExtKeyUsageServerAuth})
	kp, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	e.server = &tls.Config{Certificates: []tls.Certificate{kp}, ClientAuth: tls.RequireAnyClientCert, SessionTicketsDisabled: true, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	e.src, err = New(Config{CAFile: caFile, CertFile: e.certFile, KeyFile: e.certFile, Clock: e.clk,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.src.send = func() bool {
		if e.listening {
			e.sent++
		}
		return e.listening
	}
	return e
}

// handshake connects the Source's credentials to the server over a pipe.
func (e *env) handshake() {
	e.t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	srv := tls.Server(s, e.server)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	// The TLS connection is dropped with the pipe: its Close would wait
	// 5 s for someone to read its close_notify.
	if _, _, err := e.src.Credentials("").ClientHandshake(e.t.Context(), "switchyard-controlplane:18000", c); err != nil {
		e.t.Fatalf("client handshake: %v", err)
	}
	if err := <-done; err != nil {
		e.t.Fatalf("server handshake: %v", err)
	}
	e.presentedSerial = srv.ConnectionState().PeerCertificates[0].SerialNumber
}

type step struct {
	name string
	do   func(e *env)
}

var (
	handshake = step{"handshake", func(e *env) { e.handshake() }}
	rotate    = step{"kubelet rotates its certificate", func(e *env) {
		certfiletest.RotateLink(e.t, e.certFile, e.ca.Issue(e.t, nodeLeaf).Combined())
	}}
	garbage = step{"the certificate file holds garbage", func(e *env) {
		certfiletest.RotateLink(e.t, e.certFile, []byte("garbage"))
	}}
	newCA = step{"a new CA beside the old one", func(e *env) {
		certfiletest.WriteVolume(e.t, e.caDir, map[string][]byte{"ca.crt": certfiletest.Bundle(e.ca, certfiletest.NewCA(e.t, "next"))})
	}}
	// later lets the next handshake look at the files itself.
	later = step{"a second later", func(e *env) { e.clk.Step(certfile.DefaultMinCheckInterval) }}
)

// check is a look by Run, with a stream listening or not, and whether it
// must ask for a reconnect.
func check(listening, wantAsked bool) step {
	return step{"check", func(e *env) {
		e.t.Helper()
		e.listening = listening
		before := e.sent
		if got := e.src.Check(); got != wantAsked || (e.sent-before == 1) != wantAsked {
			e.t.Errorf("Check (listening %v) = %v with %d signals, want asked %v", listening, got, e.sent-before, wantAsked)
		}
	}}
}

// presentsCurrent checks that the last handshake presented the
// certificate in use.
var presentsCurrent = step{"the handshake presented the current certificate", func(e *env) {
	if cur := e.src.pair.Current().Leaf.SerialNumber; cur.Cmp(e.presentedSerial) != 0 {
		e.t.Errorf("presented serial %v, the current one is %v", e.presentedSerial, cur)
	}
}}

// TestReconnectOncePerRotation: a reconnect is asked exactly when the
// certificate the last handshake presented is no longer the one in use,
// once per certificate, and only when a stream listens.
func TestReconnectOncePerRotation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a rotation after a handshake asks once",
			[]step{handshake, rotate, check(true, true), check(true, false), handshake, presentsCurrent, check(true, false)}},
		{"nobody listening: asked at a later look when a stream listens",
			[]step{handshake, rotate, check(false, false), check(true, true), check(true, false)}},
		{"a handshake that already presents the new certificate asks nothing",
			[]step{handshake, rotate, later, handshake, presentsCurrent, check(true, false)}},
		{"nothing presented yet asks nothing",
			[]step{rotate, check(true, false)}},
		{"a new CA bundle asks nothing",
			[]step{handshake, newCA, check(true, false), handshake}},
		{"a file that cannot be used asks nothing, and the last good one is presented",
			[]step{handshake, garbage, check(true, false), later, handshake, presentsCurrent, check(true, false)}},
		{"two rotations, two reconnects",
			[]step{handshake, rotate, check(true, true), handshake, rotate, check(true, true), handshake, check(true, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			for i, s := range tc.steps {
				t.Logf("step %d: %s", i, s.name)
				s.do(e)
			}
		})
	}
}

// TestWithoutClientCertificate: TLS without a client certificate never
// asks for a reconnect.
func TestWithoutClientCertificate(t *testing.T) {
	e := newEnv(t)
	src, err := New(Config{CAFile: filepath.Join(e.caDir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	src.send = func() bool { t.Error("asked for a reconnect"); return true }
	if src.Check() {
		t.Error("Check = true")
	}
}

func TestNewErrors(t *testing.T) {
	e := newEnv(t)
	caFile := filepath.Join(e.caDir, "ca.crt")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no CA", Config{}, "tlscreds: no CA file"},
		{"certificate without key", Config{CAFile: caFile, CertFile: e.certFile}, "tlscreds: a client certificate needs both its file and its key's"},
		{"CA file missing", Config{CAFile: caFile + ".missing"}, "--ca-file: CA bundle: stat " + caFile + ".missing: no such file or directory"},
		{"certificate file is a CA", Config{CAFile: caFile, CertFile: caFile, KeyFile: caFile}, "--cert-file/--key-file: certificate " + caFile + ": key pair: tls: found a certificate rather than a key in the PEM for the private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunLooksEveryWatchInterval: Run notices a rotation at its next look,
// without a handshake, and asks for the reconnect.
func TestRunLooksEveryWatchInterval(t *testing.T) {
	e := newEnv(t)
	e.handshake()
	var sent atomic.Int32
	e.src.send = func() bool { sent.Add(1); return true }
	rotate.do(e)
	runtest.Start(t, e.src.Run)
	runtest.Eventually(t, "Run's ticker", e.clk.HasWaiters)
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d reconnects asked before a look", n)
	}
	e.clk.Step(certfile.DefaultWatchInterval)
	runtest.Eventually(t, "a reconnect asked", func() bool { return sent.Load() == 1 })
}
