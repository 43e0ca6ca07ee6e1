package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/issuer"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// TLS is where the gRPC server's certificate comes from: PEM files
// (CertFile, KeyFile: cert-manager, or an operator's own PKI), or the
// install's own CA in a Secret (CASecret: package issuer). One of the two,
// or Options.Insecure.
type TLS struct {
	CertFile string
	KeyFile  string
	// ClientCAFile turns on mTLS: agents must present a certificate signed
	// by it that names their node.
	ClientCAFile string
	// CASecretNamespace and CASecret name the Secret of the CA this
	// replica issues its own serving certificate from, created when
	// absent.
	CASecretNamespace, CASecret string
	// CABundle names the ConfigMap (in CASecretNamespace) the CA
	// certificate is published to, for agents; empty publishes none.
	CABundle string
	// ServerNames are DNS names and IP addresses the issued certificate
	// carries besides the advertised Service's DNS names.
	ServerNames []string
}

// tlsConfig builds the gRPC server's TLS from o; nil for plaintext. client
// is called only when the certificate comes from the CA Secret.
func (o Options) tlsConfig(ctx context.Context, client func() (kubernetes.Interface, error), log *slog.Logger) (*tls.Config, error) {
	t := o.TLS
	files := t.CertFile != "" || t.KeyFile != ""
	var cfg *tls.Config
	switch {
	case files && t.CASecret != "":
		return nil, errors.New("a certificate from files and one from the CA Secret exclude each other: drop --tls-cert-file/--tls-private-key-file or --ca-secret")
	case t.CABundle != "" && t.CASecret == "":
		return nil, errors.New("a CA bundle ConfigMap needs the CA Secret (--ca-secret) it publishes")
	case files:
		if t.CertFile == "" || t.KeyFile == "" {
			return nil, errors.New("TLS needs both a certificate and a key")
		}
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load TLS key pair: %w", err)
		}
		cfg = &tls.Config{Certificates: []tls.Certificate{cert}}
	case t.CASecret != "":
		names := serverNames(o.AdvertiseService, t.ServerNames)
		if len(names) == 0 {
			return nil, errors.New("the issued certificate names nothing: set --advertise-service or --tls-server-names")
		}
		cs, err := client()
		if err != nil {
			return nil, err
		}
		iss, err := issuer.Load(ctx, issuer.Config{
			Client: cs, Namespace: t.CASecretNamespace, Secret: t.CASecret, Bundle: t.CABundle,
			Names: names, Logger: log,
		})
		if err != nil {
			return nil, fmt.Errorf("TLS from the install's CA: %w", err)
		}
		cfg = &tls.Config{GetCertificate: iss.GetCertificate}
	default:
		if t.ClientCAFile != "" {
			return nil, errors.New("a client CA needs a server certificate: --tls-cert-file and --tls-private-key-file, or --ca-secret")
		}
		if !o.Insecure {
			return nil, errors.New("no TLS certificate given: set --ca-secret, or the certificate and key, or ask for plaintext explicitly (--insecure)")
		}
		return nil, nil
	}
	cfg.MinVersion = tls.VersionTLS12
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CA %s: no PEM certificate", t.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// serverNames are the names agents may dial a replica by: the advertised
// Service's DNS names (what deploy/'s agent config names), then extra
// (node addresses, a load balancer's name), without repeats.
func serverNames(svc model.ServiceKey, extra []string) []string {
	var names []string
	if svc != (model.ServiceKey{}) {
		n, ns := svc.Name, svc.Namespace
		names = append(names, n, n+"."+ns, n+"."+ns+".svc", n+"."+ns+".svc.cluster.local")
	}
	for _, e := range extra {
		if e != "" && !slices.Contains(names, e) {
			names = append(names, e)
		}
	}
	return names
}
