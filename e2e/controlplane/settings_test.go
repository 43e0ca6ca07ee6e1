package controlplane_test

import (
	"context"
	"io"
	"maps"
	"net/http"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const settingsCM = "switchyard-controlplane"

// putSettings creates or replaces the settings ConfigMap's config.yaml.
func putSettings(ctx context.Context, t *testing.T, api *apiserver.Server, yaml string) {
	t.Helper()
	cms := api.Client().CoreV1().ConfigMaps(systemNS)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: settingsCM}, Data: map[string]string{"config.yaml": yaml}}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

// metric returns the value of the sample of cp's /metrics whose line
// starts with series, "" when there is none.
func metric(t *testing.T, cp *controlPlane, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + cp.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			return rest
		}
	}
	return ""
}

func listNodes(ctx context.Context, t *testing.T, cp *controlPlane) *switchyardv1.ListNodesResponse {
	t.Helper()
	resp, err := switchyardv1.NewAdminServiceClient(dial(t, cp.grpc)).ListNodes(ctx, &switchyardv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func nodeStatus(resp *switchyardv1.ListNodesResponse, name string) *switchyardv1.NodeStatus {
	for _, n := range resp.GetNodes() {
		if n.GetName() == name {
			return n
		}
	}
	return nil
}

func configOf(resp *switchyardv1.DeltaSnapshotsResponse, node string) *switchyardv1.NodeConfig {
	for _, r := range resp.GetResources() {
		if r.GetName() == node {
			return r.GetNodeConfig()
		}
	}
	return nil
}

// TestReplicasShareOneSettingsConfigMap: two replicas started with
// different --mode read one ConfigMap, so a node gets the ConfigMap's mode
// from either, in byte-identical versions; failing over sends the agent
// nothing; an edit of the ConfigMap switches the node, a bad edit is
// refused and reported; a replica without the ConfigMap, on other flags,
// reports the agent that comes to it with the others' settings.
func TestReplicasShareOneSettingsConfigMap(t *testing.T) {
	ctx, api, _ := withFixture(t)
	if _, err := api.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	putSettings(ctx, t, api, "mode: nftables\nmasqueradeAll: true\n")
	ref := systemNS + "/" + settingsCM
	a := startControlPlane(t, api, "--id", "cp-a", "--mode", "iptables", "--config-map", ref)
	b := startControlPlane(t, api, "--id", "cp-b", "--mode", "ipvs", "--config-map", ref)

	// Both replicas: the ConfigMap's mode, the same versions.
	onA := openDelta(ctx, t, dial(t, a.grpc), "node-a", nil)
	first := onA.next()
	nc := configOf(first, "node-a")
	if nc.GetMode() != switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES || !nc.GetMasqueradeAll() || nc.GetSettingsHash() == "" {
		t.Fatalf("NodeConfig from cp-a (--mode iptables) %v, want the ConfigMap's nftables and masqueradeAll, with a settings hash", nc)
	}
	hash := nc.GetSettingsHash()
	fromB := openDelta(ctx, t, dial(t, b.grpc), "node-a", nil)
	firstB := fromB.next()
	if firstB.GetSystemVersion() != first.GetSystemVersion() || !maps.Equal(fromB.have, onA.have) {
		t.Fatalf("cp-b (--mode ipvs) sends system version %s and %v, cp-a %s and %v: want the same",
			firstB.GetSystemVersion(), fromB.have, first.GetSystemVersion(), onA.have)
	}

	// Failover: cp-a dies; the agent resumes on cp-b with what it has
	// and gets nothing to program.
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	agent := &switchyardv1.Node{Name: "node-a", AgentVersion: "e2e", Mode: switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES, SettingsHash: hash}
	resumed := openDeltaAs(ctx, t, dial(t, b.grpc), agent, maps.Clone(onA.have))
	if r := resumed.next(); len(r.GetResources())+len(r.GetRemovedResources()) != 0 || r.GetSystemVersion() != first.GetSystemVersion() {
		t.Fatalf("failover to cp-b sent %v, removed %v at %s; want nothing at %s",
			names(r.GetResources()), r.GetRemovedResources(), r.GetSystemVersion(), first.GetSystemVersion())
	}
	lb := listNodes(ctx, t, b)
	if s := lb.GetSettings(); s.GetHash() != hash || s.GetSource() != "configmap" || s.GetConfigMap() != ref || s.GetError() != "" {
		t.Errorf("cp-b ListNodes settings %v, want hash %s from configmap %s", s, hash, ref)
	}
	if got := nodeStatus(lb, "node-a").GetSettingsHash(); got != hash {
		t.Errorf("cp-b ListNodes node-a settings_hash %q, want %s", got, hash)
	}
	if got := metric(t, b, "switchyard_controlplane_agent_settings_differ_total"); got != "0" {
		t.Errorf("cp-b agent_settings_differ_total %q after a failover with the same settings, want 0", got)
	}

	// An edit switches the node, once; a bad edit keeps it and is reported.
	putSettings(ctx, t, api, "mode: ipvs\n")
	nc = resumed.nodeConfigUntil(ctx, "mode ipvs", func(nc *switchyardv1.NodeConfig) bool {
		return nc.GetMode() == switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS
	})
	ipvsHash := nc.GetSettingsHash()
	putSettings(ctx, t, api, "mode: ipvs\nsyncPeriod: soon\n")
	eventually(ctx, t, "cp-b reports the bad ConfigMap", func() bool {
		return metric(t, b, "switchyard_controlplane_settings_rejected_total") == "1"
	})
	if s := listNodes(ctx, t, b).GetSettings(); !strings.Contains(s.GetError(), "syncPeriod") || s.GetHash() != ipvsHash || s.GetErrorSince() == nil {
		t.Errorf("cp-b settings after a bad edit %v, want an error naming syncPeriod and hash %s kept", s, ipvsHash)
	}

	// A replica without the ConfigMap, on its own flags: its hash differs
	// (ListNodes, settings_info), and the agent that comes to it with
	// cp-b's settings is reported.
	c := startControlPlane(t, api, "--id", "cp-c", "--mode", "iptables")
	agent.Mode, agent.SettingsHash = switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS, ipvsHash
	onC := openDeltaAs(ctx, t, dial(t, c.grpc), agent, maps.Clone(resumed.have))
	if nc := configOf(onC.next(), "node-a"); nc.GetMode() != switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES {
		t.Errorf("cp-c sent NodeConfig %v, want its flag's iptables", nc)
	}
	lc := listNodes(ctx, t, c)
	if s := lc.GetSettings(); s.GetSource() != "flags" || s.GetHash() == ipvsHash || s.GetHash() == "" {
		t.Errorf("cp-c settings %v, want its flags, with a hash other than cp-b's %s", s, ipvsHash)
	}
	if got := nodeStatus(lc, "node-a").GetSettingsHash(); got != ipvsHash {
		t.Errorf("cp-c ListNodes node-a settings_hash %q, want the agent's %s", got, ipvsHash)
	}
	if got := metric(t, c, "switchyard_controlplane_agent_settings_differ_total"); got != "1" {
		t.Errorf("cp-c agent_settings_differ_total %q, want 1", got)
	}
	cHash := lc.GetSettings().GetHash()
	for _, cp := range []struct {
		cp     *controlPlane
		series string
	}{
		{b, `switchyard_controlplane_settings_info{hash="` + ipvsHash + `",source="configmap"}`},
		{c, `switchyard_controlplane_settings_info{hash="` + cHash + `",source="flags"}`},
	} {
		if got := metric(t, cp.cp, cp.series); got != "1" {
			t.Errorf("%s = %q, want 1", cp.series, got)
		}
	}
}
