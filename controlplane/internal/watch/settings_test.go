package watch

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/nodeview"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	iptables = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
	ipvs     = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
	nftables = switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES
)

func settingsConfigMap(yaml string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "switchyard-system", Name: "switchyard-controlplane"},
		Data: map[string]string{settings.Key: yaml}}
}

// TestWatcherFollowsTheSettingsConfigMap: the ConfigMap's mode beats the
// flag from the first view on; an edit reaches every node's NodeConfig;
// a bad edit keeps the settings in use; a deleted ConfigMap means the
// flags again.
func TestWatcherFollowsTheSettingsConfigMap(t *testing.T) {
	client := fake.NewClientset(testNode("node-a", "z1"), testNode("node-b", "z2"), settingsConfigMap("mode: nftables\n"))
	flags := nodeview.Defaults{Mode: iptables, MasqueradeAll: true}
	src := settings.New(settings.Config{Flags: flags, Namespace: "switchyard-system", Name: "switchyard-controlplane", Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	rec := runWatcherWith(t, Config{Client: client, Settings: src, Views: nodeview.Options{Defaults: flags}})
	mode := func(node string) switchyardv1.DataplaneMode { return rec.config(t, node).GetMode() }
	for _, node := range []string{"node-a", "node-b"} {
		if got := mode(node); got != nftables {
			t.Fatalf("%s: first NodeConfig mode %v, want the ConfigMap's nftables", node, got)
		}
		if !rec.config(t, node).GetMasqueradeAll() {
			t.Errorf("%s: masquerade_all lost: a field the ConfigMap leaves out keeps the flag", node)
		}
	}
	first := src.Status()
	if first.Source != settings.FromConfigMap || first.Hash != rec.config(t, "node-a").GetSettingsHash() {
		t.Errorf("status %+v, want source configmap and the NodeConfigs' hash %s", first, rec.config(t, "node-a").GetSettingsHash())
	}

	ctx := t.Context()
	cms := client.CoreV1().ConfigMaps("switchyard-system")
	update := func(yaml string) {
		t.Helper()
		if _, err := cms.Update(ctx, settingsConfigMap(yaml), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update("mode: ipvs\n")
	eventually(t, "ipvs on node-b", func() bool { return mode("node-b") == ipvs })
	rec.mu.Lock()
	if got := rec.changed["node-b"]; len(got) != 1 || got[0] != "node-b" {
		t.Errorf("node-b published with changed=%v, want only its NodeConfig", got)
	}
	rec.mu.Unlock()

	update("mode: ipvs\nnot-a-field: 1\n")
	eventually(t, "the bad ConfigMap reported", func() bool { return src.Status().Error != "" })
	if got := mode("node-a"); got != ipvs {
		t.Errorf("after a bad ConfigMap node-a has mode %v, want ipvs kept", got)
	}

	if err := cms.Delete(ctx, "switchyard-controlplane", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the flags' iptables again", func() bool { return mode("node-a") == iptables })
	if st := src.Status(); st.Source != settings.FromFlags || st.Error != "" {
		t.Errorf("status after delete %+v, want flags and no error", st)
	}
}

// runWatcherWith runs a watcher of cfg (its Publisher a new recorder)
// until the test ends and waits for it to be ready.
func runWatcherWith(t *testing.T, cfg Config) *recorder {
	t.Helper()
	rec := newRecorder()
	cfg.Publisher = rec
	startWatcher(t, cfg)
	return rec
}

// startWatcher runs a watcher of cfg, Publisher as given, until the test
// ends and waits for it to be ready.
func startWatcher(t *testing.T, cfg Config) {
	t.Helper()
	w := New(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-w.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("watcher never became ready")
	}
}
