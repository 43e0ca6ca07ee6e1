package ctl

import (
	"testing"

	"google.golang.org/protobuf/proto"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestExplainSourcePort: SRC may carry the client's port (a maglev
// service's one endpoint depends on it), IPv6 in brackets.
func TestExplainSourcePort(t *testing.T) {
	for _, tc := range []struct {
		src        string
		ip         string
		sourcePort uint32
	}{
		{"10.244.9.9", "10.244.9.9", 0},
		{"10.200.0.99:40000", "10.200.0.99", 40000},
		{"[fd00::5]:53000", "fd00::5", 53000},
	} {
		req, err := explainRequest([]string{"node-a", "tcp", tc.src, "10.96.0.10:80"}, false, "")
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		want := &switchyardv1.ExplainRequest{NodeName: "node-a", Protocol: "tcp", SourceIp: tc.ip, SourcePort: tc.sourcePort,
			DestinationIp: "10.96.0.10", DestinationPort: 80}
		if !proto.Equal(req, want) {
			t.Errorf("%s: request %v, want %v", tc.src, req, want)
		}
	}
	if _, err := explainRequest([]string{"node-a", "tcp", "10.0.0.1:0", "10.96.0.10:80"}, false, ""); err == nil {
		t.Error("source port 0 accepted")
	}
}
