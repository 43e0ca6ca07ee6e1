package deploy

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// applyK runs what an operator runs: `kubectl apply -k dir`, first as a
// server-side dry run (admission and validation, nothing stored), then for
// real. A dry run cannot create the namespace the rest goes into, so the
// namespace is created first.
func applyK(ctx context.Context, t *testing.T, api *apiserver.Server, dir string) {
	t.Helper()
	kc := "--kubeconfig=" + api.KubeconfigPath()
	kubectl(ctx, t, kc, "create", "namespace", systemNS)
	dry := kubectl(ctx, t, kc, "apply", "-k", dir, "--dry-run=server")
	t.Logf("server-side dry run:\n%s", dry)
	kubectl(ctx, t, kc, "apply", "-k", dir)
}

// TestApplyBase applies `deploy/` (which points at deploy/base) to a real
// kube-apiserver and checks the stored objects: mTLS by default, from the
// control plane's own CA.
func TestApplyBase(t *testing.T) {
	api := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := repoPath(t, "deploy")
	applyK(ctx, t, api, dir)
	cs := api.Client()

	_, c, ds := getWorkloads(ctx, t, cs)
	checkTLSArgs(t, c.Args, "--ca-secret=switchyard-controlplane-ca", "--ca-bundle-configmap=switchyard-ca-bundle", "--client-ca-file=")
	checkRBAC(ctx, t, cs, baseRole)
	if _, err := cs.PolicyV1().PodDisruptionBudgets(systemNS).Get(ctx, "switchyard-controlplane", metav1.GetOptions{}); err != nil {
		t.Errorf("PodDisruptionBudget: %v", err)
	}
	if _, err := cs.CoreV1().Services(systemNS).Get(ctx, "switchyard-controlplane", metav1.GetOptions{}); err != nil {
		t.Errorf("Service: %v", err)
	}
	// $(POD_IPS) is expanded by the kubelet only from the container's env.
	if !slices.Contains(c.Args, "--tls-server-names=$(POD_IPS)") || !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_IPS" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIPs"
	}) {
		t.Errorf("control plane args %v env %v: the issued certificate must name the node's addresses", c.Args, c.Env)
	}

	// Agents dial a name the issued certificate carries: the
	// --advertise-service Service's DNS names (daemon.serverNames).
	cfg := agentConfig(t, render(ctx, t, dir))
	svc := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--advertise-service="); ok {
			ns, name, _ := strings.Cut(v, "/")
			svc = name + "." + ns
		}
	}
	names := []string{strings.Split(svc, ".")[0], svc, svc + ".svc", svc + ".svc.cluster.local"}
	checkDialledNames(t, cfg, names)
	vols := podVolumes(ds.Spec.Template.Spec.Volumes)
	if got := vols["ca"].ConfigMap; got == nil || got.Name != "switchyard-ca-bundle" || len(got.Items) != 1 || got.Items[0].Key != "ca.crt" {
		t.Errorf("agent CA volume %+v: want only ca.crt of ConfigMap switchyard-ca-bundle (what --ca-bundle-configmap publishes)", vols["ca"])
	}
	if vols["ca"].Secret != nil {
		t.Error("agents mount a Secret for the CA: every kubelet could read what it holds")
	}
	checkKubeletCert(t, vols, cfg)
	checkAgentAcceptsConfig(ctx, t, cs)
}

// TestApplyPlaintextOverlay applies deploy/overlays/plaintext: the lab
// install, plaintext on both tiers and nothing of TLS left.
func TestApplyPlaintextOverlay(t *testing.T) {
	api := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dir := repoPath(t, "deploy", "overlays", "plaintext")
	applyK(ctx, t, api, dir)
	cs := api.Client()

	dep, c, ds := getWorkloads(ctx, t, cs)
	for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		if p == nil || p.GRPC == nil || p.GRPC.Port != 18000 || p.HTTPGet != nil {
			t.Errorf("control-plane probe %+v: want grpc on 18000 only (plaintext)", p)
		}
	}
	if !slices.Contains(c.Args, "--insecure") || slices.ContainsFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, "--ca-") || strings.HasPrefix(a, "--tls-") || strings.HasPrefix(a, "--client-ca")
	}) {
		t.Errorf("plaintext control plane args %v: want --insecure and no TLS flag", c.Args)
	}
	checkRBAC(ctx, t, cs, settingsRule)
	if len(dep.Spec.Template.Spec.Volumes)+len(c.VolumeMounts) > 0 {
		t.Errorf("plaintext control plane mounts %v", c.VolumeMounts)
	}
	vols := podVolumes(ds.Spec.Template.Spec.Volumes)
	if _, ok := vols["ca"]; ok {
		t.Error("plaintext agents mount a CA")
	}
	if _, ok := vols["kubelet-pki"]; ok {
		t.Error("plaintext agents mount the kubelet's key, which they do not use")
	}
	if cfg := agentConfig(t, render(ctx, t, dir)); cfg["insecure"] != true || cfg["caFile"] != nil || cfg["certFile"] != nil {
		t.Errorf("plaintext agent config %v", cfg)
	}
	checkAgentAcceptsConfig(ctx, t, cs)
}

// TestApplyMTLSOverlay applies deploy/overlays/mtls after stand-in
// cert-manager CRDs (see the package documentation) and checks that the
// two tiers' TLS settings fit together and fit what the control plane's
// authorizer checks.
func TestApplyMTLSOverlay(t *testing.T) {
	api := apiserver.Start(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	kc := "--kubeconfig=" + api.KubeconfigPath()
	crds, err := filepath.Abs(filepath.Join("testdata", "cert-manager-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kubectl(ctx, t, kc, "apply", "-f", crds)
	kubectl(ctx, t, kc, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io")
	dir := repoPath(t, "deploy", "overlays", "mtls")
	applyK(ctx, t, api, dir)
	cs := api.Client()

	dep, c, ds := getWorkloads(ctx, t, cs)
	checkTLSArgs(t, c.Args, "--tls-cert-file=", "--tls-private-key-file=", "--client-ca-file=")
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--ca-") }) {
		t.Errorf("cert-manager control plane still issues its own certificate: %v", c.Args)
	}

	objs := render(ctx, t, dir)
	cfg := agentConfig(t, objs)
	server := find(t, objs, "Certificate", "switchyard-controlplane")
	checkDialledNames(t, cfg, strs(server, "spec", "dnsNames"))
	if !slices.Contains(strs(server, "spec", "usages"), "server auth") {
		t.Errorf("server certificate usages %v lack server auth", strs(server, "spec", "usages"))
	}
	// Mounted secrets are the ones cert-manager writes; the agents' CA
	// comes from a Secret that does not hold the server's key.
	cpVols, agVols := podVolumes(dep.Spec.Template.Spec.Volumes), podVolumes(ds.Spec.Template.Spec.Volumes)
	if got, want := cpVols["tls"].Secret.SecretName, str(server, "spec", "secretName"); got != want {
		t.Errorf("control plane mounts secret %q, server Certificate writes %q", got, want)
	}
	bundle := find(t, objs, "Certificate", "switchyard-ca-bundle")
	if got, want := agVols["ca"].Secret, str(bundle, "spec", "secretName"); got == nil || got.SecretName != want || len(got.Items) != 1 || got.Items[0].Key != "ca.crt" {
		t.Errorf("agent CA volume %+v: want only ca.crt of secret %q", got, want)
	}
	if agVols["ca"].ConfigMap != nil {
		t.Errorf("agent CA volume %+v has two sources", agVols["ca"])
	}
	if agVols["ca"].Secret.SecretName == cpVols["tls"].Secret.SecretName {
		t.Error("agents mount the server certificate's Secret: every kubelet could read the server key")
	}
	if slices.Contains(strs(bundle, "spec", "usages"), "client auth") || slices.Contains(strs(bundle, "spec", "usages"), "server auth") {
		t.Errorf("ca-bundle leaf usages %v: must be useless for TLS", strs(bundle, "spec", "usages"))
	}
	checkKubeletCert(t, agVols, cfg)
	for _, kind := range []string{"issuers.cert-manager.io", "certificates.cert-manager.io"} {
		out := kubectl(ctx, t, kc, "get", kind, "-n", systemNS, "-o", "name")
		t.Logf("%s stored: %s", kind, strings.Join(strings.Fields(string(out)), " "))
	}
	checkAgentAcceptsConfig(ctx, t, cs)
}

// checkTLSArgs: no --insecure, each of want as a prefix of some argument,
// and probes the kubelet can run against a TLS server (HTTP: its grpc
// probe cannot do TLS).
func checkTLSArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	if slices.Contains(args, "--insecure") {
		t.Errorf("TLS control plane has --insecure: %v", args)
	}
	for _, w := range want {
		if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, w) }) {
			t.Errorf("control plane args %v lack %s", args, w)
		}
	}
}

// checkDialledNames: every controlPlanes host the agents dial is a name
// the server certificate carries, so verification can succeed.
func checkDialledNames(t *testing.T, cfg map[string]any, names []string) {
	t.Helper()
	if cfg["insecure"] == true {
		t.Error("TLS agent config says insecure")
	}
	for _, cp := range strs(cfg, "controlPlanes") {
		host, _, err := net.SplitHostPort(cp)
		if err != nil {
			t.Fatalf("controlPlanes entry %q: %v", cp, err)
		}
		if !slices.Contains(names, host) {
			t.Errorf("agents dial %s but the server certificate names only %v", host, names)
		}
	}
}

// checkKubeletCert: the agent presents the kubelet's client certificate,
// whose subject is CN=system:node:<node>, one of the forms
// stream.NodeCert accepts.
func checkKubeletCert(t *testing.T, vols map[string]corev1.Volume, cfg map[string]any) {
	t.Helper()
	if got := vols["kubelet-pki"].HostPath; got == nil || got.Path != "/var/lib/kubelet/pki" {
		t.Errorf("agent kubelet-pki volume %+v", got)
	}
	for _, k := range []string{"certFile", "keyFile"} {
		if v, _ := cfg[k].(string); !strings.HasPrefix(v, "/var/lib/kubelet/pki/") {
			t.Errorf("agent %s = %q, want the kubelet's client certificate", k, v)
		}
	}
	if v, _ := cfg["caFile"].(string); v != "/etc/switchyard/ca/ca.crt" {
		t.Errorf("agent caFile = %q, want the mounted bundle", v)
	}
}

func podVolumes(vs []corev1.Volume) map[string]corev1.Volume {
	m := map[string]corev1.Volume{}
	for _, v := range vs {
		m[v.Name] = v
	}
	return m
}

// getWorkloads reads the stored control plane Deployment and agent
// DaemonSet and checks what every install holds (checkControlPlane,
// checkAgent); it returns them and the control plane's container.
func getWorkloads(ctx context.Context, t *testing.T, cs kubernetes.Interface) (*appsv1.Deployment, corev1.Container, *appsv1.DaemonSet) {
	t.Helper()
	dep, err := cs.AppsV1().Deployments(systemNS).Get(ctx, "switchyard-controlplane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := cs.AppsV1().DaemonSets(systemNS).Get(ctx, "switchyard-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkControlPlane(t, dep)
	checkAgent(t, ds)
	return dep, dep.Spec.Template.Spec.Containers[0], ds
}

func checkControlPlane(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("control plane replicas %v, want 2", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	aa := spec.Affinity
	if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 ||
		aa.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("control plane anti-affinity %+v: want replicas on different nodes", aa)
	}
	if spec.ServiceAccountName != "switchyard-controlplane" {
		t.Errorf("control plane ServiceAccount %q", spec.ServiceAccountName)
	}
	c := spec.Containers[0]
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("control plane requests %v", c.Resources.Requests)
	}
}

func checkAgent(t *testing.T, d *appsv1.DaemonSet) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("agent not on the host network")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("agent mounts a ServiceAccount token; it must have no credentials")
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("agent priority class %q", spec.PriorityClassName)
	}
	if !slices.ContainsFunc(spec.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
	}) {
		t.Errorf("agent tolerations %v: want to tolerate everything", spec.Tolerations)
	}
	c := spec.Containers[0]
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("agent env %v: want NODE_NAME from spec.nodeName", c.Env)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || (sc.Privileged != nil && *sc.Privileged) {
		t.Fatalf("agent security context %+v: want capabilities, not privileged", sc)
	}
	for _, capName := range []corev1.Capability{"NET_ADMIN", "NET_RAW"} {
		if !slices.Contains(sc.Capabilities.Add, capName) {
			t.Errorf("agent capabilities %v lack %s", sc.Capabilities.Add, capName)
		}
	}
	mounts := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = true
	}
	for _, p := range []string{"/run/xtables.lock", "/var/lib/switchyard-agent"} {
		if !mounts[p] {
			t.Errorf("agent does not mount %s", p)
		}
	}
	// Kernels with every module built in have no /lib/modules: a hostPath
	// to it would fail every agent pod there (found on the real-cluster bed).
	if mounts["/lib/modules"] {
		t.Error("agent mounts /lib/modules, which the agent never reads")
	}
}

// checkRBAC proves the control plane's ClusterRole grants only reads
// (get/list/watch at most) on services, endpointslices, nodes and
// servicecidrs, and create on tokenreviews and subjectaccessreviews (the
// reviews of AdminService's bearer tokens, which read nothing); and that
// switchyard-admin grants only get on AdminService's methods.
func checkRBAC(ctx context.Context, t *testing.T, cs kubernetes.Interface, role []rbacv1.PolicyRule) {
	t.Helper()
	cr, err := cs.RbacV1().ClusterRoles().Get(ctx, "switchyard-controlplane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]string{"services": "", "nodes": "", "endpointslices": "discovery.k8s.io", "servicecidrs": "networking.k8s.io"}
	reviews := map[string]string{"tokenreviews": "authentication.k8s.io", "subjectaccessreviews": "authorization.k8s.io"}
	seen := map[string]bool{}
	for _, r := range cr.Rules {
		for _, res := range r.Resources {
			group, read := reads[res]
			if !read {
				group = reviews[res]
			}
			if _, review := reviews[res]; !read && !review || !slices.Equal(r.APIGroups, []string{group}) {
				t.Errorf("ClusterRole grants %v in groups %v", res, r.APIGroups)
			}
			for _, v := range r.Verbs {
				if read && v != "get" && v != "list" && v != "watch" || !read && v != "create" {
					t.Errorf("ClusterRole grants verb %q on %s", v, res)
				}
			}
			seen[res] = true
		}
		if len(r.ResourceNames)+len(r.NonResourceURLs) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
	}
	if len(seen) != len(reads)+len(reviews) {
		t.Errorf("ClusterRole covers %v, want %v and %v", seen, reads, reviews)
	}
	admin, err := cs.RbacV1().ClusterRoles().Get(ctx, "switchyard-admin", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/switchyard.v1.AdminService/*"}, Verbs: []string{"get"}}}
	if !reflect.DeepEqual(admin.Rules, want) {
		t.Errorf("switchyard-admin rules %+v, want %+v", admin.Rules, want)
	}
	checkRole(ctx, t, cs, role)
	crb, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "switchyard-controlplane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != systemNS || crb.Subjects[0].Name != "switchyard-controlplane" {
		t.Errorf("ClusterRoleBinding subjects %+v", crb.Subjects)
	}
}

// settingsRule: list and watch of the settings ConfigMap, by name, and
// patch of it (a rollout's progress annotation).
var settingsRule = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
	ResourceNames: []string{"switchyard-controlplane"}, Verbs: []string{"list", "watch", "patch"}}}

// baseRole adds the install's CA: get of its Secret and get/update of its
// bundle by name; create, which RBAC cannot restrict by name.
var baseRole = append(slices.Clone(settingsRule),
	rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"switchyard-controlplane-ca"}, Verbs: []string{"get"}},
	rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"switchyard-ca-bundle"}, Verbs: []string{"get", "update"}},
	rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"create"}},
)

// checkRole proves the control plane's Role in its namespace grants
// exactly want, and that the RoleBinding gives it to the control plane's
// ServiceAccount.
func checkRole(ctx context.Context, t *testing.T, cs kubernetes.Interface, want []rbacv1.PolicyRule) {
	t.Helper()
	role, err := cs.RbacV1().Roles(systemNS).Get(ctx, "switchyard-controlplane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("Role rules %+v, want %+v", role.Rules, want)
	}
	rb, err := cs.RbacV1().RoleBindings(systemNS).Get(ctx, "switchyard-controlplane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != "switchyard-controlplane" ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != systemNS || rb.Subjects[0].Name != "switchyard-controlplane" {
		t.Errorf("RoleBinding %+v / %+v", rb.RoleRef, rb.Subjects)
	}
	if _, err := cs.CoreV1().ConfigMaps(systemNS).Get(ctx, "switchyard-controlplane", metav1.GetOptions{}); err != nil {
		t.Errorf("the settings ConfigMap: %v", err)
	}
}

// checkAgentAcceptsConfig feeds the stored ConfigMap's config.yaml to the
// real agent binary. A negative --sync-period makes it stop right after
// parsing (flags override the file), so the expected failure is exactly
// that one: an unknown or mistyped field in the file would fail earlier
// with "config file".
func checkAgentAcceptsConfig(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(systemNS).Get(ctx, "switchyard-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["mode"] != "iptables" {
		t.Errorf("agent config mode %v, want iptables", cfg["mode"])
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t, "./nodeagent/cmd/switchyard-agent")
	cmd := exec.CommandContext(ctx, bin, "--config="+path, "--node-name=node-a", "--sync-period=-1s")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--sync-period must be positive") || strings.Contains(string(out), "config file") {
		t.Errorf("agent on the ConfigMap's config: err %v, output:\n%s", err, out)
	}
}
