package daemon

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/certfile"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/issuer"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// TLS is where the gRPC server's certificate comes from: PEM files
// (CertFile, KeyFile: cert-manager, or an operator's own PKI), or the
// install's own CA in a Secret (CASecret: package issuer). One of the two,
// or Options.Insecure.
type TLS struct {
	// CertFile and KeyFile are reloaded when they change: a renewed
	// certificate is served from the next handshake.
	CertFile string
	KeyFile  string
	// ClientCAFile turns on mTLS: agents must present a certificate signed
	// by a CA of this bundle that names their node. It is reloaded when it
	// changes, so a CA rotation can go through a bundle of the old and the
	// new CA.
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
	// Clock paces the looks at the files (handshakes look at most once
	// per certfile.DefaultMinCheckInterval, a watch every
	// certfile.DefaultWatchInterval); the real clock when nil (tests).
	Clock clock.WithTicker
}

// serverTLS is the gRPC server's TLS and the files it reloads.
type serverTLS struct {
	// cfg is nil for plaintext.
	cfg *tls.Config
	// files are looked at by certfile.Watch beside the handshakes, so
	// that logs and metrics follow the disk when nothing connects.
	files []certfile.Checker
}

// tlsConfig builds the gRPC server's TLS from o. client is called only
// when the certificate comes from the CA Secret. Files are reloaded when
// they change (the kubelet swaps a Secret or ConfigMap volume's files
// when cert-manager renews the certificate or the CA bundle changes),
// each load reported to files.
func (o Options) tlsConfig(ctx context.Context, client func() (kubernetes.Interface, error), log *slog.Logger, files certfile.Options) (serverTLS, error) {
	t := o.TLS
	fromFiles := t.CertFile != "" || t.KeyFile != ""
	var (
		out     serverTLS
		getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	)
	switch {
	case fromFiles && t.CASecret != "":
		return out, errors.New("a certificate from files and one from the CA Secret exclude each other: drop --tls-cert-file/--tls-private-key-file or --ca-secret")
	case t.CABundle != "" && t.CASecret == "":
		return out, errors.New("a CA bundle ConfigMap needs the CA Secret (--ca-secret) it publishes")
	case fromFiles:
		if t.CertFile == "" || t.KeyFile == "" {
			return out, errors.New("TLS needs both a certificate and a key")
		}
		kp, err := certfile.NewKeyPair(t.CertFile, t.KeyFile, files)
		if err != nil {
			return out, fmt.Errorf("load TLS key pair: %w", err)
		}
		getCert = kp.GetCertificate
		out.files = append(out.files, kp)
	case t.CASecret != "":
		names := serverNames(o.AdvertiseService, t.ServerNames)
		if len(names) == 0 {
			return out, errors.New("the issued certificate names nothing: set --advertise-service or --tls-server-names")
		}
		cs, err := client()
		if err != nil {
			return out, err
		}
		iss, err := issuer.Load(ctx, issuer.Config{
			Client: cs, Namespace: t.CASecretNamespace, Secret: t.CASecret, Bundle: t.CABundle,
			Names: names, Logger: log,
		})
		if err != nil {
			return out, fmt.Errorf("TLS from the install's CA: %w", err)
		}
		getCert = iss.GetCertificate
	default:
		if t.ClientCAFile != "" {
			return out, errors.New("a client CA needs a server certificate: --tls-cert-file and --tls-private-key-file, or --ca-secret")
		}
		if !o.Insecure {
			return out, errors.New("no TLS certificate given: set --ca-secret, or the certificate and key, or ask for plaintext explicitly (--insecure)")
		}
		return out, nil
	}
	var clientCAs *certfile.Bundle
	if t.ClientCAFile != "" {
		var err error
		if clientCAs, err = certfile.NewBundle(t.ClientCAFile, files); err != nil {
			return out, fmt.Errorf("read client CA: %w", err)
		}
		out.files = append(out.files, clientCAs)
	}
	out.cfg = certfile.ServerConfig(getCert, clientCAs)
	return out, nil
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
