package deploy

import (
	"context"
	"crypto/x509"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/internal/checkout"
	"github.com/switchyard-proxy/switchyard/e2e/internal/testca"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// TestREADMECARotation runs the README's CA rotation of the base install
// (example "ca-rotation") as printed, against the test bed's real
// kube-apiserver holding the CA Secret and bundle ConfigMap as the
// control plane creates them. The test bed runs no controllers, so
// `kubectl rollout` is a stand-in that records, at the restart, what a
// restarting replica would read: the Secret must hold the new CA and the
// bundle both CAs (the issuer keeps a bundle that holds its CA:
// controlplane/internal/issuer TestBundleKeptDuringRotation). At the end
// the bundle holds the new CA alone, the objects keep their labels, and
// the new CA's key is left only in the Secret.
func TestREADMECARotation(t *testing.T) {
	ex, ok := checkout.Examples(t)["ca-rotation"]
	if !ok {
		t.Fatal(`README has no example "ca-rotation"`)
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		checkout.Missing(t, "openssl not found: the example makes the new CA with it")
	}
	api := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cs := api.Client()
	old, err := testca.New("switchyard-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, err := old.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	// As controlplane/internal/issuer creates them.
	labels := map[string]string{"app.kubernetes.io/managed-by": "switchyard-controlplane"}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(systemNS).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "switchyard-controlplane-ca", Labels: labels}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: old.CertPEM(), corev1.TLSPrivateKeyKey: oldKey},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(systemNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "switchyard-ca-bundle", Labels: labels},
		Data:       map[string]string{"ca.crt": string(old.CertPEM())},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// kubectl: the test bed's, but `rollout` saves the Secret's and the
	// bundle's certificates at the restart instead.
	work, bin := t.TempDir(), t.TempDir()
	shim := `#!/bin/sh
for a in "$@"; do
  case "$a" in
  restart)
    "` + kubectlPath(t) + `" -n ` + systemNS + ` get secret switchyard-controlplane-ca -o jsonpath='{.data.tls\.crt}' | base64 -d > "$RESTART_DIR/secret.crt" &&
    "` + kubectlPath(t) + `" -n ` + systemNS + ` get configmap switchyard-ca-bundle -o jsonpath='{.data.ca\.crt}' > "$RESTART_DIR/bundle.crt"
    exit $? ;;
  status) exit 0 ;;
  esac
done
exec "` + kubectlPath(t) + `" "$@"
`
	if err := os.WriteFile(filepath.Join(bin, "kubectl"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	restartDir := t.TempDir()
	cmd := exec.CommandContext(ctx, "sh", "-ec", strings.Join(ex.Commands, "\n"))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "KUBECONFIG="+api.KubeconfigPath(), "RESTART_DIR="+restartDir,
		"PATH="+bin+":"+filepath.Dir(openssl)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("the example's output:\n%s", out)
	if err != nil {
		t.Fatalf("the example failed: %v", err)
	}

	newCA := readCerts(t, filepath.Join(work, "new-ca.crt"))
	if len(newCA) != 1 || !newCA[0].IsCA || newCA[0].KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Fatalf("new-ca.crt: %d certificates, want one CA that may sign", len(newCA))
	}
	atRestart := readCerts(t, filepath.Join(restartDir, "secret.crt"))
	if len(atRestart) != 1 || !atRestart[0].Equal(newCA[0]) {
		t.Error("at the restart, the Secret does not hold the new CA")
	}
	if got := readCerts(t, filepath.Join(restartDir, "bundle.crt")); len(got) != 2 || !got[0].Equal(old.Cert) || !got[1].Equal(newCA[0]) {
		t.Errorf("at the restart, the bundle holds %d certificates, want the old CA then the new", len(got))
	}
	cm, err := cs.CoreV1().ConfigMaps(systemNS).Get(ctx, "switchyard-ca-bundle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := parseCerts(t, []byte(cm.Data["ca.crt"])); len(got) != 1 || !got[0].Equal(newCA[0]) {
		t.Errorf("at the end, the bundle holds %d certificates, want the new CA alone", len(got))
	}
	sec, err := cs.CoreV1().Secrets(systemNS).Get(ctx, "switchyard-controlplane-ca", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Type != corev1.SecretTypeTLS || len(sec.Data[corev1.TLSPrivateKeyKey]) == 0 {
		t.Errorf("the CA Secret is %s with a %d-byte key, want kubernetes.io/tls with the new key", sec.Type, len(sec.Data[corev1.TLSPrivateKeyKey]))
	}
	for _, o := range []metav1.ObjectMeta{cm.ObjectMeta, sec.ObjectMeta} {
		if o.Labels["app.kubernetes.io/managed-by"] != "switchyard-controlplane" {
			t.Errorf("%s lost its labels: %v", o.Name, o.Labels)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "new-ca.key")); !os.IsNotExist(err) {
		t.Errorf("new-ca.key left on disk (stat: %v)", err)
	}
}

func readCerts(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseCerts(t, b)
}

func parseCerts(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	certs, err := testca.ParseCerts(b)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}
