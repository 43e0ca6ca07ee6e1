package issuer

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// managedBy labels what this package creates, so an operator sees where a
// Secret they did not write came from.
var managedBy = map[string]string{"app.kubernetes.io/managed-by": "switchyard-controlplane"}

// keyPair is the CA.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// store reads and writes the CA's API objects.
type store struct{ cfg Config }

// permanentError is not worth retrying: the objects must be fixed first.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// ensureCA reads the CA Secret, creating it with a new CA when absent.
func (s store) ensureCA(ctx context.Context) (*keyPair, error) {
	secrets := s.cfg.Client.CoreV1().Secrets(s.cfg.Namespace)
	for {
		sec, err := secrets.Get(ctx, s.cfg.Secret, metav1.GetOptions{})
		if err == nil {
			ca, err := decodeCA(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
			if err != nil {
				return nil, permanentError{fmt.Errorf("Secret %s/%s does not hold a CA key pair (%w): fix it, or delete it (and the bundle) to have a new CA issued", s.cfg.Namespace, s.cfg.Secret, err)}
			}
			return ca, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("get Secret %s/%s: %w", s.cfg.Namespace, s.cfg.Secret, err)
		}
		ca, keyPEM, err := newCA(s.cfg.Now())
		if err != nil {
			return nil, permanentError{err}
		}
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Secret, Namespace: s.cfg.Namespace, Labels: managedBy},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: ca.certPEM, corev1.TLSPrivateKeyKey: keyPEM},
		}, metav1.CreateOptions{})
		switch {
		case apierrors.IsAlreadyExists(err):
			continue // another replica created it first: use that one
		case err != nil:
			return nil, fmt.Errorf("create Secret %s/%s: %w", s.cfg.Namespace, s.cfg.Secret, err)
		}
		s.cfg.Logger.Info("created the install's CA", "secret", s.cfg.Namespace+"/"+s.cfg.Secret,
			"expires", ca.cert.NotAfter.UTC().Format(time.RFC3339))
		return ca, nil
	}
}

// publishBundle makes the bundle ConfigMap hold certPEM. A bundle that
// holds it among other CAs is kept as it is: during a CA rotation it
// holds the old and the new CA (agents reload it), and a replica that
// starts with the new CA must not drop the old one that the replicas not
// yet restarted still serve from.
func (s store) publishBundle(ctx context.Context, certPEM []byte) error {
	cms := s.cfg.Client.CoreV1().ConfigMaps(s.cfg.Namespace)
	ref := s.cfg.Namespace + "/" + s.cfg.Bundle
	cm, err := cms.Get(ctx, s.cfg.Bundle, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: s.cfg.Bundle, Namespace: s.cfg.Namespace, Labels: managedBy},
			Data:       map[string]string{BundleKey: string(certPEM)},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create ConfigMap %s: %w", ref, err)
		}
		s.cfg.Logger.Info("published the CA bundle for agents", "configMap", ref)
		return nil
	case err != nil:
		return fmt.Errorf("get ConfigMap %s: %w", ref, err)
	case holds(cm.Data[BundleKey], certPEM):
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[BundleKey] = string(certPEM)
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update ConfigMap %s: %w", ref, err)
	}
	s.cfg.Logger.Warn("the CA bundle for agents did not hold the CA: replaced it; agents reload it, and verify with it from their next connection", "configMap", ref)
	return nil
}

// holds reports whether the PEM bundle holds the certificate of certPEM
// (one CERTIFICATE block).
func holds(bundle string, certPEM []byte) bool {
	want, _ := pem.Decode(certPEM)
	if want == nil {
		return false
	}
	rest := []byte(bundle)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if b.Type == "CERTIFICATE" && bytes.Equal(b.Bytes, want.Bytes) {
			return true
		}
	}
}

// retry runs fn until it succeeds, fails permanently or ctx ends, waiting
// 0.5 s, doubled up to 10 s, between attempts: at install the API server
// may not authorize the new Role yet, and a control plane that reaches
// the API only later must not exit for it.
func retry(ctx context.Context, log *slog.Logger, what string, fn func() error) error {
	wait := 500 * time.Millisecond
	for {
		err := fn()
		var perm permanentError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &perm):
			return err
		}
		log.Warn("retrying: could not "+what, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// newCA creates a self-signed CA valid from now.
func newCA(now time.Time) (*keyPair, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "switchyard-ca", Organization: []string{"switchyard"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// It signs only serving certificates.
		MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign the CA: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the CA key: %w", err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	ca, err := decodeCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
	if err != nil {
		return nil, nil, err
	}
	return ca, keyPEM, nil
}

// decodeCA parses a CA certificate and its key, and checks they belong
// together and may sign.
func decodeCA(certPEM, keyPEM []byte) (*keyPair, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate in " + corev1.TLSCertKey)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", corev1.TLSCertKey, err)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("the certificate is not a CA")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("no PEM key in " + corev1.TLSPrivateKeyKey)
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("the key does not match the certificate")
	}
	// Re-encode so that CAPEM is exactly one certificate.
	return &keyPair{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cb.Bytes})}, nil
}

// parseKey reads PKCS#8 (what this package writes and cert-manager's
// default), SEC 1 EC or PKCS#1 RSA keys.
func parseKey(b *pem.Block) (crypto.Signer, error) {
	var (
		key any
		err error
	)
	switch b.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM key type %q", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", corev1.TLSPrivateKeyKey, err)
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("key of type %T cannot sign", key)
	}
	return s, nil
}
