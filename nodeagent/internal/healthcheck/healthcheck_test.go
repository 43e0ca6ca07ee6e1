package healthcheck

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/healthcheck/healthchecktest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, addr string) (int, body) {
	t.Helper()
	code, data := healthchecktest.Get(t, "http://"+addr+"/")
	var b body
	if err := json.Unmarshal([]byte(data), &b); err != nil {
		t.Fatalf("body %q: %v", data, err)
	}
	return code, b
}

func TestServers(t *testing.T) {
	p := &healthchecktest.Ports{}
	var healthy atomic.Bool
	healthy.Store(true)
	s := New(Config{Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Listen: p.Listen, ProxyHealthy: healthy.Load})
	defer s.Close()

	if err := s.Sync([]Service{{Namespace: "ns", Name: "a", Port: 30001, LocalEndpoints: 2}, {Namespace: "ns", Name: "b", Port: 30002}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		port    uint32
		code    int
		want    string
		healthy bool
	}{
		{"local endpoints", 30001, http.StatusOK, `{"service":{"namespace":"ns","name":"a"},"localEndpoints":2,"serviceProxyHealthy":true}`, true},
		{"no local endpoints", 30002, http.StatusServiceUnavailable, `{"service":{"namespace":"ns","name":"b"},"localEndpoints":0,"serviceProxyHealthy":true}`, true},
		{"proxy unhealthy", 30001, http.StatusServiceUnavailable, `{"service":{"namespace":"ns","name":"a"},"localEndpoints":2,"serviceProxyHealthy":false}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			healthy.Store(tt.healthy)
			code, got := get(t, p.Addr(tt.port))
			var want body
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if code != tt.code {
				t.Errorf("code = %d, want %d", code, tt.code)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
	healthy.Store(true)

	// b gains an endpoint, a goes away.
	oldA := p.Addr(30001)
	if err := s.Sync([]Service{{Namespace: "ns", Name: "b", Port: 30002, LocalEndpoints: 1}}); err != nil {
		t.Fatal(err)
	}
	if code, b := get(t, p.Addr(30002)); code != http.StatusOK || b.LocalEndpoints != 1 {
		t.Errorf("b after update: %d %+v", code, b)
	}
	if _, err := net.Dial("tcp", oldA); err == nil {
		t.Errorf("server of removed service still listens on %s", oldA)
	}
}

func TestServicesFromView(t *testing.T) {
	v := &view.View{Resources: map[string]*switchyardv1.Resource{
		"ns/lb": {Name: "ns/lb", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
			Namespace: "ns", Name: "lb", HealthCheckNodePort: 31000,
			LocalEndpoints: []*switchyardv1.Endpoint{{Address: "10.0.0.1", Ready: true}, {Address: "10.0.0.2", Serving: true, Terminating: true}},
		}}},
		"ns/plain": {Name: "ns/plain", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{Namespace: "ns", Name: "plain"}}},
		"node-a":   {Name: "node-a", Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{}}},
	}}
	want := []Service{{Namespace: "ns", Name: "lb", Port: 31000, LocalEndpoints: 1}}
	if diff := cmp.Diff(want, Services(v)); diff != "" {
		t.Errorf("Services (-want +got):\n%s", diff)
	}
}
