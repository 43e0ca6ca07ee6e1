package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/canary"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/canary/canarytest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/healthcheck/healthchecktest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/runtest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

type healthz struct {
	NodeHealthy     bool
	DatapathHealthy *bool
	DatapathError   string
}

func (n *node) healthz(t *testing.T, path string) (int, healthz) {
	t.Helper()
	code, body := healthchecktest.Get(t, "http://"+n.a.HealthzAddr()+path)
	var h healthz
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("%s: %q: %v", path, body, err)
	}
	return code, h
}

// TestDatapathCanary: the agent programs its canary Service with the
// node's address from the NodeConfig, keeps it out of the state files
// and the versions it announces, and /healthz plus the load-balancer
// health-check node ports follow the probe through the rules: healthy
// before the first sync (not counted), 503 while the rules do not
// forward, 200 again after; /livez stays 200.
func TestDatapathCanary(t *testing.T) {
	cp := cptest.New(t)
	dir := t.TempDir()
	// k is the node's kernel under the canary: it forwards as the fake
	// dataplane's applied rules say, behind a foreign DROP at first.
	var k canarytest.Datapath
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, options: func(o *Options) {
		o.DatapathCanary = netip.MustParseAddrPort("10.96.255.200:80")
		o.DatapathCanaryPort = 10264
		o.DatapathProbeInterval = 20 * time.Millisecond
		o.CanaryDial, o.CanaryListen = k.Dial, k.Listen
	}})
	k.Program(func() map[string]*switchyardv1.ServiceView { return n.dp.Applied().Services })
	k.SetFaults(canarytest.Faults{Broken: errors.New("operation not permitted (a foreign DROP)")})
	cp.Next()
	// Before the first sync: not probed, healthy.
	if code, h := n.healthz(t, "/healthz"); code != http.StatusOK || h.DatapathHealthy != nil {
		t.Errorf("before the first sync: %d %+v", code, h)
	}
	cfg := &switchyardv1.Resource{Name: "node-a", Version: "1", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{
		NodeName: "node-a", NodeIps: []string{"10.200.0.10"}}}}
	push(cp, "s1", "n1", nil, cfg, lbLocal("1", 1))
	expectAck(t, cp, "n1", "s1")
	sv := n.dp.Applied().Services[canary.Name]
	if ep := sv.GetClusterEndpoints(); len(ep) != 1 || ep[0].GetAddress() != "10.200.0.10" || ep[0].GetPorts()[0].GetPort() != 10264 {
		t.Fatalf("canary in the applied state = %v", sv)
	}
	if _, ok := n.a.syncer.Versions()[canary.Name]; ok {
		t.Error("the canary is in the view the agent announces")
	}
	store, err := persist.New(dir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := store.Load(); err != nil || r.Merged().Resources[canary.Name] != nil {
		t.Errorf("the persisted view holds the canary (or %v)", err)
	}

	hc := "http://" + n.hc.Addr(32000) + "/"
	runtest.Eventually(t, "/healthz 503 with the rules broken", func() bool {
		code, h := n.healthz(t, "/healthz")
		return code == http.StatusServiceUnavailable && h.DatapathHealthy != nil && !*h.DatapathHealthy &&
			strings.Contains(h.DatapathError, "foreign DROP")
	})
	if code, body := healthchecktest.Get(t, hc); code != http.StatusServiceUnavailable || !strings.Contains(body, `"serviceProxyHealthy":false`) {
		t.Errorf("health-check node port with the datapath broken: %d %s", code, body)
	}
	if code, _ := n.healthz(t, "/livez"); code != http.StatusOK {
		t.Errorf("/livez = %d with the datapath broken, want 200", code)
	}
	k.SetFaults(canarytest.Faults{})
	runtest.Eventually(t, "/healthz 200 once the rules forward", func() bool {
		code, h := n.healthz(t, "/healthz")
		return code == http.StatusOK && h.DatapathHealthy != nil && *h.DatapathHealthy && h.DatapathError == ""
	})
	if code, _ := healthchecktest.Get(t, hc); code != http.StatusOK {
		t.Errorf("health-check node port with the datapath repaired: %d", code)
	}
	_, metrics := healthchecktest.Get(t, "http://"+n.a.MetricsAddr()+"/metrics")
	for _, want := range []string{"switchyard_agent_datapath_healthy 1", `switchyard_agent_datapath_probes_total{result="failed"}`,
		`switchyard_agent_datapath_probes_total{result="ok"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
