package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/certfile/certfiletest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/metrics"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func TestTLSConfigChoices(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // error substring; "" for plaintext
	}{
		{"nothing", Options{}, "no TLS certificate given"},
		{"insecure", Options{Insecure: true}, ""},
		{"files and CA secret", Options{TLS: TLS{CertFile: "c", KeyFile: "k", CASecret: "ca", CASecretNamespace: "ns"}}, "exclude each other"},
		{"bundle without secret", Options{TLS: TLS{CABundle: "b"}}, "needs the CA Secret"},
		{"client CA alone", Options{Insecure: true, TLS: TLS{ClientCAFile: "ca.crt"}}, "a client CA needs a server certificate"},
		{"half a key pair", Options{TLS: TLS{CertFile: "c"}}, "both a certificate and a key"},
		{"CA secret naming nothing", Options{TLS: TLS{CASecret: "ca", CASecretNamespace: "ns"}}, "names nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.tlsConfig(t.Context(), fakeClient(fake.NewClientset()), slog.New(slog.DiscardHandler), certfile.Options{})
			switch {
			case tc.want == "" && (err != nil || got.cfg != nil || got.files != nil):
				t.Errorf("= %+v, %v; want plaintext", got, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestTLSFromCASecret: --ca-secret serves a certificate for the advertised
// Service's names and the extra addresses, verifiable with the published
// bundle.
func TestTLSFromCASecret(t *testing.T) {
	c := fake.NewClientset()
	o := Options{
		AdvertiseService: model.ServiceKey{Namespace: "switchyard-system", Name: "switchyard-controlplane"},
		TLS: TLS{CASecretNamespace: "switchyard-system", CASecret: "switchyard-controlplane-ca", CABundle: "switchyard-ca-bundle",
			ServerNames: []string{"10.201.0.10", "switchyard-controlplane"}},
	}
	got, err := o.tlsConfig(t.Context(), fakeClient(c), slog.New(slog.DiscardHandler), certfile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.files) != 0 {
		t.Errorf("%d files to watch, want none", len(got.files))
	}
	crt, err := got.cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"switchyard-controlplane", "switchyard-controlplane.switchyard-system",
		"switchyard-controlplane.switchyard-system.svc", "switchyard-controlplane.switchyard-system.svc.cluster.local"}
	if !slices.Equal(crt.Leaf.DNSNames, want) || len(crt.Leaf.IPAddresses) != 1 {
		t.Errorf("DNS names %v IPs %v, want %v and 10.201.0.10", crt.Leaf.DNSNames, crt.Leaf.IPAddresses, want)
	}
	cm, err := c.CoreV1().ConfigMaps("switchyard-system").Get(t.Context(), "switchyard-ca-bundle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"]))
	if _, err := crt.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "10.201.0.10"}); err != nil {
		t.Errorf("verify with the bundle: %v", err)
	}
}

func fakeClient(c *fake.Clientset) func() (kubernetes.Interface, error) {
	return func() (kubernetes.Interface, error) { return c, nil }
}

// TestTLSFilesReloaded: with cert-manager's Secret mounted
// (--tls-cert-file, --tls-private-key-file) and the client CA from a
// ConfigMap (--client-ca-file), a renewal and a CA rotation with an
// overlapping bundle reach the next handshake's configuration without a
// restart, each load reported to the metrics.
func TestTLSFilesReloaded(t *testing.T) {
	oldCA, newCA := certfiletest.NewCA(t, "old CA"), certfiletest.NewCA(t, "new CA")
	serving := certfiletest.Leaf{CN: "switchyard-controlplane", DNS: []string{"switchyard-controlplane"}, Usage: x509.ExtKeyUsageServerAuth}
	node := certfiletest.Leaf{CN: "system:node:node-a", Usage: x509.ExtKeyUsageClientAuth}
	tlsDir, caDir := t.TempDir(), t.TempDir()
	writeServing := func(c certfiletest.Issued) {
		certfiletest.WriteVolume(t, tlsDir, map[string][]byte{"tls.crt": c.CertPEM, "tls.key": c.KeyPEM})
	}
	first := oldCA.Issue(t, serving)
	writeServing(first)
	certfiletest.WriteVolume(t, caDir, map[string][]byte{"ca.crt": oldCA.PEM()})
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.RegisterCertificates(reg)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	o := Options{TLS: TLS{CertFile: filepath.Join(tlsDir, "tls.crt"), KeyFile: filepath.Join(tlsDir, "tls.key"), ClientCAFile: filepath.Join(caDir, "ca.crt")}}
	got, err := o.tlsConfig(t.Context(), nil, slog.New(slog.DiscardHandler), certfile.Options{Clock: clk, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.files) != 2 || got.cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("%d files to watch, client auth %v; want 2 and client certificates required", len(got.files), got.cfg.ClientAuth)
	}
	// handshakeConfig is what the next handshake runs with, a second on.
	handshakeConfig := func() (*x509.Certificate, *x509.CertPool) {
		clk.SetTime(clk.Now().Add(certfile.DefaultMinCheckInterval))
		c, err := got.cfg.GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		crt, err := c.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return crt.Leaf, c.ClientCAs
	}
	verifies := func(pool *x509.CertPool, ca *certfiletest.CA) bool {
		_, err := ca.Issue(t, node).Cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}
	renewed := oldCA.Issue(t, serving)
	for _, s := range []struct {
		name               string
		do                 func()
		want               *x509.Certificate
		clientOld, clientN bool
	}{
		{"start", func() {}, first.Cert, true, false},
		{"cert-manager renews", func() { writeServing(renewed) }, renewed.Cert, true, false},
		{"client CAs old and new", func() {
			certfiletest.WriteVolume(t, caDir, map[string][]byte{"ca.crt": certfiletest.Bundle(oldCA, newCA)})
		}, renewed.Cert, true, true},
		{"client CAs new only", func() { certfiletest.WriteVolume(t, caDir, map[string][]byte{"ca.crt": newCA.PEM()}) }, renewed.Cert, false, true},
	} {
		s.do()
		leaf, pool := handshakeConfig()
		if !leaf.Equal(s.want) {
			t.Errorf("%s: serving serial %v, want %v", s.name, leaf.SerialNumber, s.want.SerialNumber)
		}
		if o, n := verifies(pool, oldCA), verifies(pool, newCA); o != s.clientOld || n != s.clientN {
			t.Errorf("%s: clients of the old CA accepted %v, of the new %v; want %v, %v", s.name, o, n, s.clientOld, s.clientN)
		}
	}
	if n := testutil.ToFloat64(m.Reloads.WithLabelValues(filepath.Join(tlsDir, "tls.crt"), metrics.ReloadOK)); n != 2 {
		t.Errorf("serving certificate loads = %v, want 2", n)
	}
	if n := testutil.ToFloat64(m.Reloads.WithLabelValues(filepath.Join(caDir, "ca.crt"), metrics.ReloadOK)); n != 3 {
		t.Errorf("client CA loads = %v, want 3", n)
	}
	if x := testutil.ToFloat64(m.NotAfter.WithLabelValues(filepath.Join(tlsDir, "tls.crt"))); x != float64(renewed.Cert.NotAfter.Unix()) {
		t.Errorf("expiry = %v, want %v", x, renewed.Cert.NotAfter.Unix())
	}
}
