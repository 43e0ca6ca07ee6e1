package apiserver

import (
	"context"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Client-side rate limits for configs handed out: high enough that tests
// and benchmarks measure the server, not client-go's default 5 QPS.
const (
	clientQPS   = 1000
	clientBurst = 2000
)

// RESTConfig returns a fresh admin (system:masters) config.
func (s *Server) RESTConfig() *rest.Config {
	return s.TokenConfig(s.creds.adminToken)
}

// TokenConfig returns a config that authenticates with a bearer token, e.g.
// a ServiceAccount token, and is subject to RBAC.
func (s *Server) TokenConfig(token string) *rest.Config {
	return &rest.Config{
		Host:            s.url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), s.caPEM...)},
		QPS:             clientQPS,
		Burst:           clientBurst,
	}
}

// ImpersonatingConfig returns an admin config that impersonates user in
// groups, so requests are authorized by RBAC as that user.
func (s *Server) ImpersonatingConfig(user string, groups ...string) *rest.Config {
	cfg := s.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// Client returns the admin clientset, built once at start-up.
func (s *Server) Client() kubernetes.Interface { return s.client }

func (s *Server) newClient() error {
	cs, err := kubernetes.NewForConfig(s.RESTConfig())
	if err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	s.client = cs
	return nil
}

// ServiceAccountConfig makes sure the ServiceAccount namespace/name exists
// (there is no controller manager to create it) and returns a config that
// authenticates with a fresh token for it.
func (s *Server) ServiceAccountConfig(ctx context.Context, namespace, name string) (*rest.Config, error) {
	cs := s.client
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	_, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	expiry := int64(3600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	tr, err = cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	return s.TokenConfig(tr.Status.Token), nil
}

// writeKubeconfig writes an admin kubeconfig into the state directory.
func (s *Server) writeKubeconfig() error {
	const name = "switchyard-testbed"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.url, CertificateAuthority: s.creds.caFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: s.creds.adminToken}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = name
	path := filepath.Join(s.dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	s.kubeconfig = path
	return nil
}
