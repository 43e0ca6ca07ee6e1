package cluster

import (
	"bufio"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestKubeProxyManifest decodes the rendered manifest for each mode and
// checks what the bed and the e2e suite depend on.
func TestKubeProxyManifest(t *testing.T) {
	for _, mode := range []string{KubeProxyIPTables, KubeProxyNFTables} {
		t.Run(mode, func(t *testing.T) {
			m := kubeProxyManifestFor("registry.k8s.io/kube-proxy:v1.37.2", mode, Config{}.clusterCIDRs())
			if strings.Contains(m, "{{") {
				t.Fatalf("placeholder left in the manifest:\n%s", m)
			}
			ds, cm := decodeKubeProxy(t, m)

			spec := ds.Spec.Template.Spec
			if got := ds.Spec.Template.Labels["k8s-app"]; got != "kube-proxy" {
				t.Errorf("pod label k8s-app = %q, want kube-proxy (the restart spec deletes pods by it)", got)
			}
			if !spec.HostNetwork {
				t.Error("not hostNetwork")
			}
			ctr := spec.Containers[0]
			if ctr.SecurityContext == nil || ctr.SecurityContext.Privileged == nil || !*ctr.SecurityContext.Privileged {
				t.Error("not privileged")
			}
			if ctr.ImagePullPolicy != corev1.PullNever || ctr.Image != "registry.k8s.io/kube-proxy:v1.37.2" {
				t.Errorf("image %s pull %s, want the imported image, never pulled", ctr.Image, ctr.ImagePullPolicy)
			}
			if !slices.Contains(ctr.Command, "--hostname-override=$(NODE_NAME)") {
				t.Errorf("command %v lacks --hostname-override=$(NODE_NAME)", ctr.Command)
			}
			env := map[string]string{}
			for _, e := range ctr.Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					env[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
				} else {
					env[e.Name] = e.Value
				}
			}
			wantEnv := map[string]string{"KUBERNETES_SERVICE_HOST": "10.201.0.3", "KUBERNETES_SERVICE_PORT": "6443",
				"NODE_NAME": "fieldRef:spec.nodeName"}
			if diff := cmp.Diff(wantEnv, env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			var lock bool
			for _, v := range spec.Volumes {
				if v.HostPath != nil {
					if v.HostPath.Path != "/run/xtables.lock" {
						t.Errorf("hostPath %s: only /run/xtables.lock is the node's to share", v.HostPath.Path)
					}
					lock = true
				}
			}
			if !lock {
				t.Error("no /run/xtables.lock hostPath")
			}

			var cfg struct {
				Mode               string
				ClusterCIDR        string
				HealthzBindAddress string
				MetricsBindAddress string
				OOMScoreAdj        *int32
				Conntrack          map[string]any
			}
			if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(cm.Data["config.conf"]), 4096).Decode(&cfg); err != nil {
				t.Fatalf("config.conf: %v", err)
			}
			if cfg.Mode != mode || cfg.ClusterCIDR != "10.244.0.0/16" ||
				cfg.HealthzBindAddress != "0.0.0.0:10256" || cfg.MetricsBindAddress != "0.0.0.0:10249" {
				t.Errorf("config %+v", cfg)
			}
			if cfg.OOMScoreAdj == nil || *cfg.OOMScoreAdj != 0 {
				t.Errorf("oomScoreAdj %v, want 0", cfg.OOMScoreAdj)
			}
			// Each of these, when not zero, makes kube-proxy write an
			// nf_conntrack sysctl (pkg/proxy/conntrack.setSysctls).
			wantCT := map[string]any{"maxPerCore": int64(0), "min": int64(0), "tcpEstablishedTimeout": "0s",
				"tcpCloseWaitTimeout": "0s", "tcpBeLiberal": false, "udpTimeout": "0s", "udpStreamTimeout": "0s"}
			if diff := cmp.Diff(wantCT, normalizeNumbers(cfg.Conntrack)); diff != "" {
				t.Errorf("conntrack (-want +got):\n%s", diff)
			}
		})
	}
}

func decodeKubeProxy(t *testing.T, manifest string) (*appsv1.DaemonSet, *corev1.ConfigMap) {
	t.Helper()
	var ds *appsv1.DaemonSet
	var cm *corev1.ConfigMap
	docs := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			if err := utilyaml.Unmarshal(doc, ds); err != nil {
				t.Fatal(err)
			}
		case "ConfigMap":
			cm = &corev1.ConfigMap{}
			if err := utilyaml.Unmarshal(doc, cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if ds == nil || cm == nil {
		t.Fatalf("manifest lacks the DaemonSet or the ConfigMap")
	}
	return ds, cm
}

// normalizeNumbers turns JSON numbers (float64 or int64) into int64.
func normalizeNumbers(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		switch n := v.(type) {
		case float64:
			out[k] = int64(n)
		case int:
			out[k] = int64(n)
		default:
			out[k] = v
		}
	}
	return out
}
