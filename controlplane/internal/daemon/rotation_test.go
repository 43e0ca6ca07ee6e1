package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestRotationServedByRun runs the control plane (Run, over a fake
// clientset) with cert-manager's Secret and a client CA ConfigMap
// mounted as files, and subscribes as node-a over new connections while
// the files change: a renewed serving certificate is served without a
// restart, and a CA rotation through a bundle of the old and the new CA
// accepts agents of both, then of the new CA only; the node identity
// check (stream.NodeCert) reads the chains verified with the current
// bundle.
func TestRotationServedByRun(t *testing.T) {
	oldCA, newCA := certfiletest.NewCA(t, "old CA"), certfiletest.NewCA(t, "new CA")
	servingLeaf := certfiletest.Leaf{CN: "switchyard-controlplane", DNS: []string{"switchyard-controlplane"}, Usage: x509.ExtKeyUsageServerAuth}
	nodeLeaf := certfiletest.Leaf{CN: "system:node:node-a", Usage: x509.ExtKeyUsageClientAuth}
	tlsDir, caDir := t.TempDir(), t.TempDir()
	writeServing := func(c certfiletest.Issued) {
		certfiletest.WriteVolume(t, tlsDir, map[string][]byte{"tls.crt": c.CertPEM, "tls.key": c.KeyPEM})
	}
	writeClientCA := func(b []byte) { certfiletest.WriteVolume(t, caDir, map[string][]byte{"ca.crt": b}) }
	s1 := oldCA.Issue(t, servingLeaf)
	writeServing(s1)
	writeClientCA(oldCA.PEM())

	clk := clocktesting.NewFakeClock(time.Now())
	ready := make(chan string, 1)
	o := Options{
		Client: fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}),
		Listen: "127.0.0.1:0", ID: "cp-0",
		TLS: TLS{
			CertFile: filepath.Join(tlsDir, "tls.crt"), KeyFile: filepath.Join(tlsDir, "tls.key"),
			ClientCAFile: filepath.Join(caDir, "ca.crt"), Clock: clk,
		},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
		Ready:  func(addr string) { ready <- addr },
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not serving within 30s")
	}

	// Agents trust both CAs throughout: this test is about the server.
	roots := x509.NewCertPool()
	roots.AddCert(oldCA.Cert)
	roots.AddCert(newCA.Cert)
	// subscribe opens a stream as node-a presenting c over a new
	// connection and returns the serving certificate of its handshake.
	subscribe := func(c certfiletest.Issued) (*x509.Certificate, error) {
		t.Helper()
		kp, err := tls.X509KeyPair(c.CertPEM, c.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		var served *x509.Certificate
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: roots, ServerName: "switchyard-controlplane", MinVersion: tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil },
			VerifyConnection: func(cs tls.ConnectionState) error {
				served = cs.PeerCertificates[0]
				return nil
			},
		})))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		stream, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(sctx)
		if err == nil {
			err = stream.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: "node-a"}})
		}
		if err == nil {
			_, err = stream.Recv()
		}
		return served, err
	}
	// later lets the next handshake look at the files.
	later := func() { clk.Step(certfile.DefaultMinCheckInterval) }

	a1, aNew := oldCA.Issue(t, nodeLeaf), newCA.Issue(t, nodeLeaf)
	s2, s3 := oldCA.Issue(t, servingLeaf), newCA.Issue(t, servingLeaf)
	for _, s := range []struct {
		name        string
		do          func()
		agent       certfiletest.Issued
		wantServed  certfiletest.Issued
		wantRefused bool
	}{
		{"start", func() {}, a1, s1, false},
		{"cert-manager renews the serving certificate", func() { writeServing(s2) }, a1, s2, false},
		{"an agent of the new CA before the bundle has it", func() {}, aNew, s2, true},
		{"client CAs old and new: an agent of the old CA", func() { writeClientCA(certfiletest.Bundle(oldCA, newCA)) }, a1, s2, false},
		{"client CAs old and new: an agent of the new CA", func() {}, aNew, s2, false},
		{"serving certificate from the new CA", func() { writeServing(s3) }, aNew, s3, false},
		{"client CAs new only: an agent of the new CA", func() { writeClientCA(newCA.PEM()) }, aNew, s3, false},
		{"client CAs new only: an agent of the old CA", func() {}, a1, s3, true},
	} {
		s.do()
		later()
		served, err := subscribe(s.agent)
		if served == nil || !served.Equal(s.wantServed.Cert) {
			t.Errorf("%s: served %v, want serial %v", s.name, served, s.wantServed.Cert.SerialNumber)
		}
		switch {
		case s.wantRefused && status.Code(err) != codes.Unavailable:
			t.Errorf("%s: %v, want the handshake refused (Unavailable)", s.name, err)
		case !s.wantRefused && err != nil:
			t.Errorf("%s: %v", s.name, err)
		}
	}
}
