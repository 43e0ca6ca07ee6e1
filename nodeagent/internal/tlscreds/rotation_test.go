package tlscreds_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/tlscreds"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestRotationOverGRPC holds an agent's DeltaSnapshots stream (the
// discovery client, over this package's credentials) to a control plane
// serving mTLS with the control plane's own TLS code (certfile's key pair,
// client CA bundle and ServerConfig, as controlplane/internal/daemon
// builds it), and rotates every file on disk the way Kubernetes does:
// the kubelet's client certificate, the serving certificate of a Secret
// volume, and the CA with an overlapping bundle in both trust files
// (ConfigMap volumes). After each step the stream still carries a view
// (pushed and ACKed on the stream number expected), the agent has asked
// for at most one reconnect, and the certificates presented on the new
// connection are the new ones, as each side saw them.
func TestRotationOverGRPC(t *testing.T) {
	oldCA, newCA := certfiletest.NewCA(t, "old CA"), certfiletest.NewCA(t, "new CA")
	nodeLeaf := certfiletest.Leaf{CN: "system:node:node-a", DNS: []string{"node-a"}, Usage: x509.ExtKeyUsageClientAuth}
	servingLeaf := certfiletest.Leaf{CN: "switchyard-controlplane", DNS: []string{"switchyard-controlplane"}, Usage: x509.ExtKeyUsageServerAuth}

	// The agent's files: kubelet-client-current.pem and the CA bundle
	// ConfigMap. The control plane's: its Secret volume and its client
	// CA ConfigMap.
	certFile := filepath.Join(t.TempDir(), "kubelet-client-current.pem")
	agentCADir, tlsDir, clientCADir := t.TempDir(), t.TempDir(), t.TempDir()
	writeClientCert := func(c certfiletest.Issued) { certfiletest.RotateLink(t, certFile, c.Combined()) }
	writeServing := func(c certfiletest.Issued) {
		certfiletest.WriteVolume(t, tlsDir, map[string][]byte{"tls.crt": c.CertPEM, "tls.key": c.KeyPEM})
	}
	writeBundles := func(b []byte) {
		certfiletest.WriteVolume(t, agentCADir, map[string][]byte{"ca.crt": b})
		certfiletest.WriteVolume(t, clientCADir, map[string][]byte{"ca.crt": b})
	}
	a1, s1 := oldCA.Issue(t, nodeLeaf), oldCA.Issue(t, servingLeaf)
	writeClientCert(a1)
	writeServing(s1)
	writeBundles(oldCA.PEM())

	// The control plane. Its files are looked at on handshakes at most
	// once a second of serverClk.
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))
	serverClk := clocktesting.NewFakePassiveClock(time.Now())
	serverOpts := certfile.Options{Clock: serverClk, Logger: logger.With("side", "server")}
	serving, err := certfile.NewKeyPair(filepath.Join(tlsDir, "tls.crt"), filepath.Join(tlsDir, "tls.key"), serverOpts)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs, err := certfile.NewBundle(filepath.Join(clientCADir, "ca.crt"), serverOpts)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := certfile.ServerConfig(serving.GetCertificate, clientCAs)
	cp := cptest.New(t, cptest.WithTLS(serverTLS))
	serverLooks := func() { serverClk.SetTime(serverClk.Now().Add(certfile.DefaultMinCheckInterval)) }

	// The agent.
	loads := &loadLog{}
	src, err := tlscreds.New(tlscreds.Config{
		CAFile: filepath.Join(agentCADir, "ca.crt"), CertFile: certFile, KeyFile: certFile,
		Observer: loads, Logger: logger.With("side", "agent"),
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := &observing{TransportCredentials: src.Credentials("switchyard-controlplane")}
	app := &applier{v: &view.View{Resources: map[string]*switchyardv1.Resource{}}}
	client, err := discovery.New(discovery.Config{
		Addresses:   []string{cp.Addr()},
		Node:        &switchyardv1.Node{Name: "node-a"},
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(seen)},
		Reconnect:   src.Reconnect(),
		Backoff:     discovery.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond},
		Applier:     app,
		Logger:      logger.With("side", "agent", "component", "discovery"),
	})
	if err != nil {
		t.Fatal(err)
	}
	runtest.Start(t, client.Run)

	version := 0
	// carries pushes a new version onto the current stream and waits for
	// its ACK, which must come on stream want.
	carries := func(step string, want int) {
		t.Helper()
		version++
		v := string(rune('0' + version))
		cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s" + v, Nonce: "n" + v, Resources: []*switchyardv1.Resource{{
			Name: "ns/web", Version: v, Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{Namespace: "ns", Name: "web"}},
		}}})
		if r := cp.Next(); r.Stream != want || r.GetAppliedVersion() != "s"+v {
			t.Fatalf("%s: %v on stream %d, want the ACK of s%s on stream %d", step, r.DeltaSnapshotsRequest, r.Stream, v, want)
		}
	}
	// opened reads the first request of a new stream, checks it is
	// stream want, resumed from what was applied and presented client
	// (seen by the server) while the client saw server; the control
	// plane answers an unchanged view with an empty batch.
	opened := func(step string, want int, client, server certfiletest.Issued) {
		t.Helper()
		r := cp.Next()
		if r.Stream != want || r.GetNode().GetName() != "node-a" {
			t.Fatalf("%s: %v on stream %d, want a new stream %d", step, r.DeltaSnapshotsRequest, r.Stream, want)
		}
		if version > 0 {
			if d := cmp.Diff(map[string]string{"ns/web": string(rune('0' + version))}, r.GetInitialResourceVersions()); d != "" {
				t.Errorf("%s: initial_resource_versions (-want +got):\n%s", step, d)
			}
		}
		info, ok := r.Peer.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.VerifiedChains) == 0 {
			t.Fatalf("%s: stream %d is not mutually authenticated: %+v", step, want, r.Peer)
		}
		if got := info.State.PeerCertificates[0]; !got.Equal(client.Cert) {
			t.Errorf("%s: the control plane saw client certificate %v from %q, want %v from %q",
				step, got.SerialNumber, got.Issuer.CommonName, client.Cert.SerialNumber, client.Cert.Issuer.CommonName)
		}
		if got := seen.last(); got == nil || !got.Equal(server.Cert) {
			t.Errorf("%s: the agent saw server certificate %v, want %v from %q", step, got, server.Cert.SerialNumber, server.Cert.Issuer.CommonName)
		}
		if version > 0 {
			cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s" + string(rune('0'+version)), Nonce: "resume"})
			if ack := cp.Next(); ack.GetResponseNonce() != "resume" || ack.GetErrorDetail() != nil {
				t.Fatalf("%s: answer to the resume = %v", step, ack.DeltaSnapshotsRequest)
			}
		}
	}
	asked := 0
	// reconnects waits for the agent to ask for a reconnect (a stream
	// must listen for the signal); noReconnect checks it asks none.
	reconnects := func() {
		t.Helper()
		runtest.Eventually(t, "the agent asks for a reconnect", src.Check)
		asked++
	}
	noReconnect := func(step string) {
		t.Helper()
		if src.Check() {
			t.Errorf("%s: the agent asked for a reconnect", step)
			asked++
		}
	}

	opened("start", 1, a1, s1)
	carries("start", 1)

	step := "the kubelet rotates its client certificate"
	a2 := oldCA.Issue(t, nodeLeaf)
	writeClientCert(a2)
	reconnects()
	opened(step, 2, a2, s1)
	carries(step, 2)
	noReconnect(step + ", looked at again")

	step = "cert-manager renews the serving certificate"
	s2 := oldCA.Issue(t, servingLeaf)
	writeServing(s2)
	serverLooks()
	noReconnect(step)
	carries(step, 2) // the session of the old certificate goes on
	cp.EndStream(status.Error(codes.Unavailable, "replica restarting"))
	opened(step+", next connection", 3, a2, s2)

	step = "CA rotation: both trust files hold the old and the new CA"
	writeBundles(certfiletest.Bundle(oldCA, newCA))
	serverLooks()
	noReconnect(step)
	carries(step, 3)

	step = "CA rotation: both certificates re-issued by the new CA"
	a3, s3 := newCA.Issue(t, nodeLeaf), newCA.Issue(t, servingLeaf)
	writeServing(s3)
	serverLooks()
	writeClientCert(a3)
	reconnects()
	opened(step, 4, a3, s3)
	carries(step, 4)
	noReconnect(step + ", looked at again")

	step = "CA rotation: the old CA dropped from both trust files"
	writeBundles(newCA.PEM())
	serverLooks()
	noReconnect(step)
	carries(step, 4)
	cp.EndStream(status.Error(codes.Unavailable, "replica restarting"))
	opened(step+", next connection", 5, a3, s3)
	carries(step+", next connection", 5)
	if err := dialWith(t, cp.Addr(), newCA, a2); err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Errorf("%s: a client certificate of the old CA: %v, want refused (unknown certificate authority)", step, err)
	}

	if n := cp.Streams(); n != 5 || asked != 2 {
		t.Errorf("%d streams with %d reconnects asked by the agent, want 5 with 2 (one per client certificate rotation; the control plane ended two)", n, asked)
	}
	want := []string{
		certFile + " ok", // start
		filepath.Join(agentCADir, "ca.crt") + " ok",
		certFile + " ok", // kubelet rotation
		filepath.Join(agentCADir, "ca.crt") + " ok", // old and new
		certFile + " ok", // from the new CA
		filepath.Join(agentCADir, "ca.crt") + " ok", // new only
	}
	if d := cmp.Diff(sortedByFile(want), sortedByFile(loads.all())); d != "" {
		t.Errorf("the agent's loads (-want +got):\n%s", d)
	}
}

// dialWith completes a TLS handshake with the control plane at addr as a
// client presenting c and trusting ca, and reports the server's verdict.
func dialWith(t *testing.T, addr string, ca *certfiletest.CA, c certfiletest.Issued) error {
	t.Helper()
	kp, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: cptest.Timeout}, Config: &tls.Config{
		RootCAs: roots, ServerName: "switchyard-controlplane", NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil },
	}}
	ctx, cancel := context.WithTimeout(t.Context(), cptest.Timeout)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	// TLS 1.3: the server's verdict on the client certificate arrives
	// after the client's handshake; a read gets it.
	_ = conn.SetReadDeadline(time.Now().Add(cptest.Timeout))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// observing records the server certificate of each handshake.
type observing struct {
	credentials.TransportCredentials
	mu      sync.Mutex
	servers []*x509.Certificate
}

func (o *observing) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := o.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err == nil {
		o.mu.Lock()
		o.servers = append(o.servers, info.(credentials.TLSInfo).State.PeerCertificates[0])
		o.mu.Unlock()
	}
	return conn, info, err
}

func (o *observing) Clone() credentials.TransportCredentials { return o }

func (o *observing) last() *x509.Certificate {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.servers) == 0 {
		return nil
	}
	return o.servers[len(o.servers)-1]
}

// loadLog is a certfile.Observer.
type loadLog struct {
	mu    sync.Mutex
	loads []string
}

func (l *loadLog) Loaded(file string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res := "ok"
	if err != nil {
		res = err.Error()
	}
	l.loads = append(l.loads, file+" "+res)
}

func (l *loadLog) Expiry(string, time.Time) {}

func (l *loadLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.loads...)
}

// sortedByFile keeps each file's loads in order, files apart: the order
// between the two files' looks is not the test's concern.
func sortedByFile(loads []string) map[string][]string {
	out := map[string][]string{}
	for _, l := range loads {
		i := strings.LastIndex(l, " ")
		out[l[:i]] = append(out[l[:i]], l[i+1:])
	}
	return out
}

// applier is the agent's last applied view, without a dataplane.
type applier struct {
	mu sync.Mutex
	v  *view.View
}

func (a *applier) Versions() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.v.Versions()
}

func (a *applier) Apply(_ context.Context, u *view.Update) (view.Applied, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.v = a.v.With(u)
	return view.Applied{}, nil
}
