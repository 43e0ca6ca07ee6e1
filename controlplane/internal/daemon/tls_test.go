package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

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
			cfg, err := tc.o.tlsConfig(t.Context(), fakeClient(fake.NewClientset()), slog.New(slog.DiscardHandler))
			switch {
			case tc.want == "" && (err != nil || cfg != nil):
				t.Errorf("= %v, %v; want plaintext", cfg, err)
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
	cfg, err := o.tlsConfig(t.Context(), fakeClient(c), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	crt, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
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
