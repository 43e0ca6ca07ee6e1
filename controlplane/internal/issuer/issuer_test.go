package issuer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const ns = "switchyard-system"

var names = []string{"switchyard-controlplane.switchyard-system.svc", "10.201.0.10", "fd00::10"}

func config(c *fake.Clientset, now *time.Time) Config {
	return Config{Client: c, Namespace: ns, Secret: "switchyard-controlplane-ca", Bundle: "switchyard-ca-bundle",
		Names: names, Now: func() time.Time { return *now }}
}

// verify checks that the issuer's current certificate is a server
// certificate for every name, chaining to the published bundle only.
func verify(t *testing.T, c *fake.Clientset, i *Issuer) *x509.Certificate {
	t.Helper()
	cm, err := c.CoreV1().ConfigMaps(ns).Get(t.Context(), "switchyard-ca-bundle", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(cm.Data[BundleKey])) {
		t.Fatalf("bundle %q holds no certificate", cm.Data[BundleKey])
	}
	if cm.Data[BundleKey] != string(i.CAPEM()) {
		t.Error("the bundle differs from the issuer's CA")
	}
	crt, err := i.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		opts := x509.VerifyOptions{Roots: pool, DNSName: n, CurrentTime: i.cfg.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		if _, err := crt.Leaf.Verify(opts); err != nil {
			t.Errorf("serving certificate for %s: %v", n, err)
		}
	}
	opts := x509.VerifyOptions{Roots: pool, CurrentTime: i.cfg.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := crt.Leaf.Verify(opts); err == nil {
		t.Error("the serving certificate also authenticates clients")
	}
	return crt.Leaf
}

// load loads an issuer over c at *now and verifies it.
func load(t *testing.T, c *fake.Clientset, now *time.Time) *Issuer {
	t.Helper()
	i, err := Load(t.Context(), config(c, now))
	if err != nil {
		t.Fatal(err)
	}
	verify(t, c, i)
	return i
}

func TestLoadCreatesOneCA(t *testing.T) {
	now := time.Now()
	c := fake.NewClientset()
	first := load(t, c, &now)
	sec, err := c.CoreV1().Secrets(ns).Get(t.Context(), "switchyard-controlplane-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Type != corev1.SecretTypeTLS || sec.Labels["app.kubernetes.io/managed-by"] != "switchyard-controlplane" {
		t.Errorf("Secret type %q labels %v", sec.Type, sec.Labels)
	}
	// A second replica uses the same CA: agents trust one bundle.
	second := load(t, c, &now)
	if string(second.CAPEM()) != string(first.CAPEM()) {
		t.Error("a second replica made another CA")
	}
}

// TestLoadLosesTheRace: another replica creates the Secret between this
// one's Get and Create; this one must use the winner's CA.
func TestLoadLosesTheRace(t *testing.T) {
	now := time.Now()
	c := fake.NewClientset()
	winner, keyPEM, err := newCA(now)
	if err != nil {
		t.Fatal(err)
	}
	raced := false
	c.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controlplane-ca", Namespace: ns}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: winner.certPEM, corev1.TLSPrivateKeyKey: keyPEM}}
		if err := c.Tracker().Add(sec); err != nil {
			t.Error(err)
		}
		return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, sec.Name)
	})
	i := load(t, c, &now)
	if !raced || string(i.CAPEM()) != string(winner.certPEM) {
		t.Errorf("raced=%t; the loser serves its own CA, not the winner's", raced)
	}
}

func TestLoadRefusesWhatIsNotACA(t *testing.T) {
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(leafKey)
	otherCA, _, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]map[string][]byte{
		"empty":            {},
		"garbage":          {corev1.TLSCertKey: []byte("x"), corev1.TLSPrivateKeyKey: []byte("y")},
		"key of another":   {corev1.TLSCertKey: otherCA.certPEM, corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})},
		"certificate only": {corev1.TLSCertKey: otherCA.certPEM},
	} {
		t.Run(name, func(t *testing.T) {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controlplane-ca", Namespace: ns}, Data: data}
			c := fake.NewClientset(sec)
			now := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := Load(ctx, config(c, &now))
			if err == nil || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "does not hold a CA key pair") {
				t.Fatalf("Load = %v, want an error at once naming the Secret", err)
			}
			got, _ := c.CoreV1().Secrets(ns).Get(t.Context(), sec.Name, metav1.GetOptions{})
			if len(got.Data) != len(data) {
				t.Error("the Secret was overwritten")
			}
		})
	}
}

// TestLoadAdoptsCertManagerCA: a CA written elsewhere (cert-manager's
// Secret, SEC 1 EC key) is used as is.
func TestLoadAdoptsCertManagerCA(t *testing.T) {
	ca, _, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(ca.key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controlplane-ca", Namespace: ns},
		Data: map[string][]byte{corev1.TLSCertKey: ca.certPEM, corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})}})
	now := time.Now()
	if i := load(t, c, &now); string(i.CAPEM()) != string(ca.certPEM) {
		t.Error("an existing CA was replaced")
	}
}

// TestBundleRepaired: a bundle that holds something else is replaced.
func TestBundleRepaired(t *testing.T) {
	c := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-ca-bundle", Namespace: ns},
		Data: map[string]string{BundleKey: "stale", "other": "kept"}})
	now := time.Now()
	load(t, c, &now)
	cm, _ := c.CoreV1().ConfigMaps(ns).Get(t.Context(), "switchyard-ca-bundle", metav1.GetOptions{})
	if cm.Data["other"] != "kept" {
		t.Error("the repair dropped other keys")
	}
}

// TestBundleKeptDuringRotation: a bundle that holds the CA among others
// (the old and the new CA, during a rotation) is left as it is.
func TestBundleKeptDuringRotation(t *testing.T) {
	ca, keyPEM, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := newCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bundle string
		kept         bool
	}{
		{"old and new", string(other.certPEM) + string(ca.certPEM), true},
		{"new and old", string(ca.certPEM) + "\n" + string(other.certPEM), true},
		{"old only", string(other.certPEM), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientset(
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controlplane-ca", Namespace: ns},
					Data: map[string][]byte{corev1.TLSCertKey: ca.certPEM, corev1.TLSPrivateKeyKey: keyPEM}},
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-ca-bundle", Namespace: ns},
					Data: map[string]string{BundleKey: tc.bundle}})
			now := time.Now()
			if _, err := Load(t.Context(), config(c, &now)); err != nil {
				t.Fatal(err)
			}
			cm, _ := c.CoreV1().ConfigMaps(ns).Get(t.Context(), "switchyard-ca-bundle", metav1.GetOptions{})
			want := string(ca.certPEM)
			if tc.kept {
				want = tc.bundle
			}
			if got := cm.Data[BundleKey]; got != want {
				t.Errorf("bundle after Load:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestRetriesTransientErrors: an API that fails at first (not reachable
// yet, Role not yet authorized) delays Load, it does not fail it.
func TestRetriesTransientErrors(t *testing.T) {
	c := fake.NewClientset()
	fails := 2
	c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fails == 0 {
			return false, nil, nil
		}
		fails--
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "switchyard-controlplane-ca", errors.New("not yet"))
	})
	now := time.Now()
	i, err := Load(t.Context(), config(c, &now))
	if err != nil || fails != 0 {
		t.Fatalf("Load = %v with %d failures left", err, fails)
	}
	verify(t, c, i)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c2 := fake.NewClientset()
	c2.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	if _, err := Load(ctx, config(c2, &now)); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with the API down and ctx cancelled = %v, want context.Canceled", err)
	}
}

// TestRenewal: the serving certificate is kept until two thirds of its
// lifetime, then a new one is issued; never beyond the CA.
func TestRenewal(t *testing.T) {
	now := time.Now()
	c := fake.NewClientset()
	i, err := Load(t.Context(), config(c, &now))
	if err != nil {
		t.Fatal(err)
	}
	first := verify(t, c, i)
	if got := first.NotAfter.Sub(now); got < DefaultLeafLifetime-time.Second || got > DefaultLeafLifetime {
		t.Errorf("lifetime %v, want %v", got, DefaultLeafLifetime)
	}
	now = now.Add(DefaultLeafLifetime/2 + time.Hour)
	if again := verify(t, c, i); again.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Error("renewed before two thirds of the lifetime")
	}
	now = now.Add(DefaultLeafLifetime / 6)
	renewed := verify(t, c, i)
	if renewed.SerialNumber.Cmp(first.SerialNumber) == 0 || !renewed.NotAfter.After(first.NotAfter) {
		t.Error("not renewed after two thirds of the lifetime")
	}
	now = now.Add(CALifetime)
	if last, err := i.GetCertificate(nil); err != nil || last.Leaf.NotAfter.After(i.ca.NotAfter) {
		t.Errorf("a certificate outliving the CA: %v, %v", last.Leaf.NotAfter, err)
	}
}
