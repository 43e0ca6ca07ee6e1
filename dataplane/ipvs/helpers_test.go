package ipvs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/conntrack"
	"github.com/switchyard-proxy/switchyard/dataplane/dataplanetest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"

	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
)

// newDataplane builds a Dataplane on f; cfg's zero fields get test
// defaults (nft flavour, IPv4).
func newDataplane(t testing.TB, f *ipvstest.Fake, cfg ipvs.Config) *ipvs.Dataplane {
	t.Helper()
	cfg.Kernel, cfg.Runner = f, f
	if cfg.Flavour == xtables.FlavourAuto {
		cfg.Flavour = xtables.FlavourNFT
	}
	if len(cfg.Families) == 0 {
		cfg.Families = []dataplane.Family{dataplane.IPv4}
	}
	if cfg.Logger == nil {
		cfg.Logger = dataplanetest.Logger(t)
	}
	dp, err := ipvs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

// logBuffer collects log records as "msg key=value…" lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// lines returns the records whose message is msg.
func (l *logBuffer) lines(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, "msg=\""+msg+"\"") || strings.Contains(line, "msg="+msg) {
			out = append(out, line)
		}
	}
	return out
}

// conntrackRecorder is a conntrack.Cleaner that records its calls.
type conntrackRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (c *conntrackRecorder) record(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *conntrackRecorder) DeleteUDP(_ context.Context, fam dataplane.Family, flows []conntrack.Flow) error {
	for _, f := range flows {
		c.record(fmt.Sprintf("%d %v nodePort=%v endpoint=%v", fam, f.Dst, f.NodePort, f.Endpoint))
	}
	return nil
}

func (c *conntrackRecorder) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// svc is a TCP ClusterIP service ns/name on ip:80 with endpoints on 8080.
func svc(name, ip string, proto switchyardv1.Protocol, eps ...string) *switchyardv1.ServiceView {
	sv := &switchyardv1.ServiceView{
		Namespace: "ns", Name: name, Type: switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:            []string{ip},
		Ports:                 []*switchyardv1.ServicePort{{Name: "p", Protocol: proto, Port: 80}},
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		HasAnyEndpoints:       len(eps) > 0,
	}
	for _, e := range eps {
		sv.ClusterEndpoints = append(sv.ClusterEndpoints, &switchyardv1.Endpoint{
			Address: e, Ports: []*switchyardv1.EndpointPort{{Name: "p", Port: 8080}}, Ready: true, Serving: true,
		})
	}
	return sv
}

func state(cfg *switchyardv1.NodeConfig, svcs ...*switchyardv1.ServiceView) *dataplane.State {
	if cfg == nil {
		cfg = &switchyardv1.NodeConfig{NodeName: "n", ClusterCidrs: []string{"10.244.0.0/16"}, NodeIps: []string{"10.200.0.10"}}
	}
	return dataplanetest.NewState(cfg, svcs...)
}
