package issuer

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Defaults.
const (
	// DefaultLeafLifetime of a serving certificate; a new one is issued
	// after two thirds of it.
	DefaultLeafLifetime = 30 * 24 * time.Hour
	// CALifetime of a CA this package creates: the root agents pin.
	CALifetime = 10 * 365 * 24 * time.Hour
	// BundleKey is the key of the CA certificate in the bundle ConfigMap,
	// as in kube-root-ca.crt and cert-manager's Secrets.
	BundleKey = "ca.crt"
)

// Config configures Load.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	// Secret names the Secret (type kubernetes.io/tls) that holds the CA.
	Secret string
	// Bundle names the ConfigMap the CA certificate is published to
	// (BundleKey); empty publishes none.
	Bundle string
	// Names are the serving certificate's DNS names and IP addresses.
	Names []string
	// LeafLifetime defaults to DefaultLeafLifetime.
	LeafLifetime time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Issuer serves certificates issued by the install's CA.
type Issuer struct {
	cfg   Config
	ca    *x509.Certificate
	key   crypto.Signer
	caPEM []byte

	mu      sync.Mutex
	leaf    *tls.Certificate
	renewAt time.Time
}

// Load reads the install's CA, creating it when the Secret does not exist,
// publishes the bundle and issues the first serving certificate. Failures
// to reach the API are retried until ctx ends; a Secret that does not hold
// a CA is an error at once.
func Load(ctx context.Context, cfg Config) (*Issuer, error) {
	if cfg.LeafLifetime <= 0 {
		cfg.LeafLifetime = DefaultLeafLifetime
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Secret == "" || cfg.Namespace == "" {
		return nil, errors.New("issuer: the CA Secret needs a namespace and a name")
	}
	if len(cfg.Names) == 0 {
		return nil, errors.New("issuer: the serving certificate needs at least one name")
	}
	st := store{cfg: cfg}
	var ca *keyPair
	if err := retry(ctx, cfg.Logger, "read or create the CA Secret "+cfg.Namespace+"/"+cfg.Secret, func() (err error) {
		ca, err = st.ensureCA(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	if cfg.Bundle != "" {
		if err := retry(ctx, cfg.Logger, "publish the CA bundle "+cfg.Namespace+"/"+cfg.Bundle, func() error {
			return st.publishBundle(ctx, ca.certPEM)
		}); err != nil {
			return nil, err
		}
	}
	i := &Issuer{cfg: cfg, ca: ca.cert, key: ca.key, caPEM: ca.certPEM}
	if _, err := i.current(); err != nil {
		return nil, err
	}
	cfg.Logger.Info("serving with a certificate from the control plane's own CA",
		"secret", cfg.Namespace+"/"+cfg.Secret, "bundle", cfg.Bundle, "names", cfg.Names,
		"caExpires", ca.cert.NotAfter.UTC().Format(time.RFC3339))
	return i, nil
}

// CAPEM is the CA certificate agents verify the control plane with.
func (i *Issuer) CAPEM() []byte { return i.caPEM }

// GetCertificate is tls.Config.GetCertificate: the current serving
// certificate, issued anew once it reached its renewal time.
func (i *Issuer) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return i.current()
}

func (i *Issuer) current() (*tls.Certificate, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.cfg.Now()
	if i.leaf != nil && now.Before(i.renewAt) {
		return i.leaf, nil
	}
	leaf, renewAt, err := i.issue(now)
	if err != nil {
		if i.leaf != nil && now.Before(i.leaf.Leaf.NotAfter) {
			// Keep serving the valid one; the next handshake tries again.
			i.cfg.Logger.Warn("could not renew the serving certificate", "err", err)
			return i.leaf, nil
		}
		return nil, err
	}
	i.leaf, i.renewAt = leaf, renewAt
	i.cfg.Logger.Info("issued a serving certificate", "names", i.cfg.Names,
		"expires", leaf.Leaf.NotAfter.UTC().Format(time.RFC3339), "renewAt", renewAt.UTC().Format(time.RFC3339))
	return leaf, nil
}

// issue signs a serving certificate for cfg.Names valid from now.
func (i *Issuer) issue(now time.Time) (*tls.Certificate, time.Time, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("serving key: %w", err)
	}
	notAfter := now.Add(i.cfg.LeafLifetime)
	if notAfter.After(i.ca.NotAfter) {
		notAfter = i.ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "switchyard-controlplane"},
		// Clocks of agents may lag the control plane's.
		NotBefore:   now.Add(-5 * time.Minute),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range i.cfg.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, i.ca, &key.PublicKey, i.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("sign the serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("parse the serving certificate: %w", err)
	}
	renewAt := now.Add(notAfter.Sub(now) * 2 / 3)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, renewAt, nil
}

// serial is a random 128-bit serial number, as RFC 5280 asks.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the OS has no entropy source
	}
	return n
}
