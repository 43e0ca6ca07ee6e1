package controlplane_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

const systemNS = "switchyard-system"

// applyRBAC creates the objects of deploy/base/controlplane-rbac.yaml, as
// kustomize would place them (namespace switchyard-system).
func applyRBAC(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	root, err := apiserver.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "base", "controlplane-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if err := create(ctx, cs, meta.Kind, doc); err != nil {
			t.Fatalf("create %s: %v", meta.Kind, err)
		}
	}
}

func create(ctx context.Context, cs kubernetes.Interface, kind string, doc []byte) error {
	opts := metav1.CreateOptions{}
	switch kind {
	case "ServiceAccount":
		return createFrom(doc, func(o *corev1.ServiceAccount) error {
			_, err := cs.CoreV1().ServiceAccounts(systemNS).Create(ctx, o, opts)
			return err
		})
	case "ClusterRole":
		return createFrom(doc, func(o *rbacv1.ClusterRole) error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, o, opts)
			return err
		})
	case "ClusterRoleBinding":
		return createFrom(doc, func(o *rbacv1.ClusterRoleBinding) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, o, opts)
			return err
		})
	case "Role":
		return createFrom(doc, func(o *rbacv1.Role) error { _, err := cs.RbacV1().Roles(systemNS).Create(ctx, o, opts); return err })
	case "RoleBinding":
		return createFrom(doc, func(o *rbacv1.RoleBinding) error {
			_, err := cs.RbacV1().RoleBindings(systemNS).Create(ctx, o, opts)
			return err
		})
	}
	return fmt.Errorf("unexpected kind %q in controlplane-rbac.yaml", kind)
}

// createFrom decodes doc strictly into a new T and hands it to create.
func createFrom[T any](doc []byte, create func(*T) error) error {
	var o T
	if err := yaml.UnmarshalStrict(doc, &o); err != nil {
		return err
	}
	return create(&o)
}

// writeKubeconfig writes a token kubeconfig for cfg.
func writeKubeconfig(t *testing.T, cfg *rest.Config, caFile string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	body := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, cfg.Host, caFile, cfg.BearerToken)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDeployRBAC proves deploy/base's RBAC against the real API server:
// the control plane, running with only its ServiceAccount's token, syncs
// and serves; it can read nothing else and write nothing; the agent's
// ServiceAccount can read nothing at all.
func TestDeployRBAC(t *testing.T) {
	ctx, api, _ := withFixture(t)
	applyRBAC(ctx, t, api.Client())
	putSettings(ctx, t, api, "mode: nftables\n")

	cpCfg, err := api.ServiceAccountConfig(ctx, systemNS, "switchyard-controlplane")
	if err != nil {
		t.Fatal(err)
	}
	agentCfg, err := api.ServiceAccountConfig(ctx, systemNS, "switchyard-agent")
	if err != nil {
		t.Fatal(err)
	}
	cpClient := kubernetes.NewForConfigOrDie(cpCfg)
	agentClient := kubernetes.NewForConfigOrDie(agentCfg)

	checks := []struct {
		name    string
		call    func() error
		allowed bool
	}{
		{"controlplane lists services", func() error { _, err := cpClient.CoreV1().Services("").List(ctx, metav1.ListOptions{}); return err }, true},
		{"controlplane lists endpointslices", func() error {
			_, err := cpClient.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
			return err
		}, true},
		{"controlplane lists nodes", func() error { _, err := cpClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); return err }, true},
		{"controlplane lists servicecidrs", func() error {
			_, err := cpClient.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
			return err
		}, true},
		{"controlplane reviews tokens", func() error {
			_, err := cpClient.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "x"}}, metav1.CreateOptions{})
			return err
		}, true},
		{"controlplane reviews access", func() error {
			_, err := cpClient.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: "alice", NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/switchyard.v1.AdminService/ListNodes", Verb: "get"}}}, metav1.CreateOptions{})
			return err
		}, true},
		{"controlplane lists its settings ConfigMap by name", func() error {
			_, err := cpClient.CoreV1().ConfigMaps(systemNS).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=switchyard-controlplane"})
			return err
		}, true},
		{"controlplane watches its settings ConfigMap by name", func() error {
			w, err := cpClient.CoreV1().ConfigMaps(systemNS).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=switchyard-controlplane"})
			if err == nil {
				w.Stop()
			}
			return err
		}, true},
		{"controlplane cannot list every ConfigMap of its namespace", func() error {
			_, err := cpClient.CoreV1().ConfigMaps(systemNS).List(ctx, metav1.ListOptions{})
			return err
		}, false},
		{"controlplane cannot list ConfigMaps elsewhere", func() error {
			_, err := cpClient.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=switchyard-controlplane"})
			return err
		}, false},
		{"controlplane cannot read secrets", func() error { _, err := cpClient.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); return err }, false},
		{"controlplane cannot get another Secret of its namespace", func() error {
			_, err := cpClient.CoreV1().Secrets(systemNS).Get(ctx, "someone-elses", metav1.GetOptions{})
			return err
		}, false},
		{"controlplane cannot update another ConfigMap of its namespace", func() error {
			_, err := cpClient.CoreV1().ConfigMaps(systemNS).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-agent", Namespace: systemNS}}, metav1.UpdateOptions{})
			return err
		}, false},
		{"controlplane patches its settings ConfigMap (a rollout's progress)", func() error {
			_, err := cpClient.CoreV1().ConfigMaps(systemNS).Patch(ctx, "switchyard-controlplane", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"switchyard.io/rollout-progress":"{\"name\":\"none\",\"step\":0}"}}}`), metav1.PatchOptions{})
			return err
		}, true},
		{"controlplane cannot replace its settings ConfigMap", func() error {
			_, err := cpClient.CoreV1().ConfigMaps(systemNS).Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controlplane", Namespace: systemNS}}, metav1.UpdateOptions{})
			return err
		}, false},
		{"controlplane cannot patch another ConfigMap of its namespace", func() error {
			_, err := cpClient.CoreV1().ConfigMaps(systemNS).Patch(ctx, "switchyard-agent", types.MergePatchType,
				[]byte(`{"metadata":{"annotations":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		}, false},
		{"controlplane cannot delete services", func() error {
			return cpClient.CoreV1().Services(ns).Delete(ctx, "front", metav1.DeleteOptions{})
		}, false},
		{"agent cannot list services", func() error { _, err := agentClient.CoreV1().Services("").List(ctx, metav1.ListOptions{}); return err }, false},
		{"agent cannot list endpointslices", func() error {
			_, err := agentClient.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
			return err
		}, false},
		{"agent cannot list servicecidrs", func() error {
			_, err := agentClient.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
			return err
		}, false},
	}
	for _, c := range checks {
		err := c.call()
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.allowed && !apierrors.IsForbidden(err):
			t.Errorf("%s: want Forbidden, got %v", c.name, err)
		}
	}

	// The real binary, with nothing but its ServiceAccount token, syncs and
	// serves the fixture's service.
	// --config-map as deploy/ sets it: the settings ConfigMap (written
	// above) is read under the Role.
	cp := startControlPlane(t, api, "--kubeconfig", writeKubeconfig(t, cpCfg, api.CAFile()),
		"--config-map", systemNS+"/switchyard-controlplane")
	if s := listNodes(ctx, t, cp).GetSettings(); s.GetSource() != "configmap" {
		t.Errorf("control plane under its own RBAC: settings %v, want them from the ConfigMap", s)
	}
	out := nodeResourceNames(ctx, t, dial(t, cp.grpc))
	if !strings.Contains(out, "web/front") {
		t.Errorf("control plane under its own RBAC does not serve web/front:\n%s", out)
	}

	// deploy/'s TLS: the install's CA created and published under the
	// Role, then served; a second replica uses the same CA.
	var bundles []string
	for i := range 2 {
		cp := startControlPlane(t, api, "--kubeconfig", writeKubeconfig(t, cpCfg, api.CAFile()),
			"--ca-secret", systemNS+"/switchyard-controlplane-ca", "--ca-bundle-configmap", "switchyard-ca-bundle",
			"--tls-server-names", "127.0.0.1")
		cm, err := api.Client().CoreV1().ConfigMaps(systemNS).Get(ctx, "switchyard-ca-bundle", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("replica %d: the CA bundle: %v\n%s", i, err, cp.logs)
		}
		bundles = append(bundles, cm.Data["ca.crt"])
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
			t.Fatalf("bundle %q", cm.Data["ca.crt"])
		}
		conn, err := grpc.NewClient(cp.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if out := nodeResourceNames(ctx, t, conn); !strings.Contains(out, "web/front") {
			t.Errorf("replica %d over TLS from its own CA does not serve web/front:\n%s", i, out)
		}
	}
	if bundles[0] != bundles[1] {
		t.Error("the second replica published another CA")
	}
	sec, err := api.Client().CoreV1().Secrets(systemNS).Get(ctx, "switchyard-controlplane-ca", metav1.GetOptions{})
	if err != nil || sec.Type != corev1.SecretTypeTLS || len(sec.Data["tls.key"]) == 0 {
		t.Errorf("the CA Secret: %v %v", sec, err)
	}
}

// nodeResourceNames returns the names in node-a's first delta response,
// one per line.
func nodeResourceNames(ctx context.Context, t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	c := openDelta(ctx, t, conn, "node-a", nil)
	var names []string
	for _, r := range c.next().GetResources() {
		names = append(names, r.GetName())
	}
	return strings.Join(names, "\n")
}
