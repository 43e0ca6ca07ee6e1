package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/canary"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// fakeKernel forwards the canary's connections as the fake dataplane's
// applied rules say: cluster IP:port to the endpoint, then to the
// loopback port the endpoint's listener really got. broken stands for a
// foreign DROP in front of those rules.
type fakeKernel struct {
	dp *dataplanetest.Fake

	mu      sync.Mutex
	listens map[string]string
	broken  bool
}

func (k *fakeKernel) listen(ctx context.Context, network, addr string) (net.Listener, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.listens[addr] = l.Addr().String()
	return l, nil
}

func (k *fakeKernel) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	k.mu.Lock()
	to, err := k.forward(addr)
	k.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return (&net.Dialer{}).DialContext(ctx, network, to)
}

func (k *fakeKernel) forward(addr string) (string, error) {
	if k.broken {
		return "", errors.New("operation not permitted (a foreign DROP)")
	}
	st := k.dp.Applied()
	for _, sv := range st.Services {
		for _, p := range sv.GetPorts() {
			if len(sv.GetClusterIps()) == 0 || net.JoinHostPort(sv.GetClusterIps()[0], fmt.Sprint(p.GetPort())) != addr || len(sv.GetClusterEndpoints()) == 0 {
				continue
			}
			ep := sv.GetClusterEndpoints()[0]
			if to, ok := k.listens[net.JoinHostPort(ep.GetAddress(), fmt.Sprint(ep.GetPorts()[0].GetPort()))]; ok {
				return to, nil
			}
		}
	}
	return "", fmt.Errorf("no rule forwards %s", addr)
}

func (k *fakeKernel) setBroken(b bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.broken = b
}

type healthz struct {
	NodeHealthy     bool
	DatapathHealthy *bool
	DatapathError   string
}

func (n *node) healthz(t *testing.T, path string) (int, healthz) {
	t.Helper()
	code, body := get(t, "http://"+n.a.HealthzAddr()+path)
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
	var k *fakeKernel
	n := startNode(t, nodeOpts{addrs: []string{cp.Addr()}, stateDir: dir, options: func(o *Options) {
		o.DatapathCanary = netip.MustParseAddrPort("10.96.255.200:80")
		o.DatapathCanaryPort = 10264
		o.DatapathProbeInterval = 20 * time.Millisecond
		k = &fakeKernel{listens: map[string]string{}}
		o.CanaryDial, o.CanaryListen = k.dial, k.listen
	}})
	k.dp = n.dp
	k.setBroken(true)
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

	hc := "http://" + n.hcAddr(32000) + "/"
	waitFor(t, "/healthz 503 with the rules broken", func() bool {
		code, h := n.healthz(t, "/healthz")
		return code == http.StatusServiceUnavailable && h.DatapathHealthy != nil && !*h.DatapathHealthy &&
			strings.Contains(h.DatapathError, "foreign DROP")
	})
	if code, body := get(t, hc); code != http.StatusServiceUnavailable || !strings.Contains(body, `"serviceProxyHealthy":false`) {
		t.Errorf("health-check node port with the datapath broken: %d %s", code, body)
	}
	if code, _ := n.healthz(t, "/livez"); code != http.StatusOK {
		t.Errorf("/livez = %d with the datapath broken, want 200", code)
	}
	k.setBroken(false)
	waitFor(t, "/healthz 200 once the rules forward", func() bool {
		code, h := n.healthz(t, "/healthz")
		return code == http.StatusOK && h.DatapathHealthy != nil && *h.DatapathHealthy && h.DatapathError == ""
	})
	if code, _ := get(t, hc); code != http.StatusOK {
		t.Errorf("health-check node port with the datapath repaired: %d", code)
	}
	_, metrics := get(t, "http://"+n.a.MetricsAddr()+"/metrics")
	for _, want := range []string{"switchyard_agent_datapath_healthy 1", `switchyard_agent_datapath_probes_total{result="failed"}`,
		`switchyard_agent_datapath_probes_total{result="ok"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
