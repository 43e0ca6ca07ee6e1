package main

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// TestTLSLearntAddress: a learnt control-plane address is an IP, which the
// control plane's certificate need not carry (the mTLS overlay's names
// only the Service's DNS names). The agent verifies it against the host of
// the first configured address.
func TestTLSLearntAddress(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "switchyard-ca")
	caFile := writePEM(t, dir, "ca.pem", ca.certPEM)
	nodeCert, nodeKey := ca.issue(t, "node-a", x509.ExtKeyUsageClientAuth, []string{"node-a"}, nil)
	tlsArgs := []string{"--ca-file", caFile, "--cert-file", writePEM(t, dir, "node-a.pem", nodeCert), "--key-file", writePEM(t, dir, "node-a-key.pem", nodeKey)}
	const svcName = "switchyard-controlplane.switchyard-system.svc"
	certPEM, keyPEM := ca.issue(t, "switchyard-controlplane", x509.ExtKeyUsageServerAuth, []string{svcName}, nil)
	serverCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("learnt IP verified against the configured name", func(t *testing.T) {
		hs := &handshakes{}
		cp := cptest.New(t, cptest.WithTLS(hs.serverConfig(t, serverCert, ca.pool())))
		ag := &agentRun{stateDir: t.TempDir(), done: make(chan error, 1)}
		learn(t, ag.stateDir, cp.Addr())
		// The configured name does not resolve here: only the learnt
		// address can be reached, as on a node without cluster DNS.
		ag.start(t, append([]string{"--control-plane", svcName + ":18000"}, tlsArgs...)...)
		first := cp.Next()
		info, ok := first.Peer.AuthInfo.(credentials.TLSInfo)
		if !ok || len(info.State.VerifiedChains) == 0 {
			t.Fatalf("stream is not mutually authenticated: peer %+v", first.Peer)
		}
		if got := info.State.ServerName; got != svcName {
			t.Errorf("SNI = %q, want %q", got, svcName)
		}
		cp.Push(&switchyardv1.DeltaSnapshotsResponse{SystemVersion: "s1", Nonce: "n1", Resources: []*switchyardv1.Resource{{
			Name: "ns/web", Version: "1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{Namespace: "ns", Name: "web", ClusterIps: []string{"10.96.0.1"}}},
		}}})
		if r := cp.Next(); r.GetAppliedVersion() != "s1" {
			t.Fatalf("ACK = %v", r)
		}
		ag.stop(t)
	})

	// deploy/'s control planes issue themselves certificates naming their
	// node's addresses; agents configured with node addresses then verify
	// a learnt address as itself (the first configured IP would name
	// another replica).
	t.Run("learnt IP verified as itself when the configured address is an IP", func(t *testing.T) {
		ipCert, ipKey := ca.issue(t, "switchyard-controlplane", x509.ExtKeyUsageServerAuth, nil, []net.IP{net.IPv4(127, 0, 0, 1)})
		pair, err := tls.X509KeyPair(ipCert, ipKey)
		if err != nil {
			t.Fatal(err)
		}
		hs := &handshakes{}
		cp := cptest.New(t, cptest.WithTLS(hs.serverConfig(t, pair, ca.pool())))
		ag := &agentRun{stateDir: t.TempDir(), done: make(chan error, 1)}
		learn(t, ag.stateDir, cp.Addr())
		// Nothing listens on the configured address: only the learnt one
		// can be reached.
		ag.start(t, append([]string{"--control-plane", "127.0.0.2:1"}, tlsArgs...)...)
		first := cp.Next()
		if info, ok := first.Peer.AuthInfo.(credentials.TLSInfo); !ok || len(info.State.VerifiedChains) == 0 {
			t.Fatalf("stream is not mutually authenticated: peer %+v", first.Peer)
		}
		ag.stop(t)
	})

	t.Run("the same IP configured is verified as an IP, and refused", func(t *testing.T) {
		hs := &handshakes{}
		cp := cptest.New(t, cptest.WithTLS(hs.serverConfig(t, serverCert, ca.pool())))
		ag := startAgent(t, cp, tlsArgs...)
		ag.refused(t, cp, hs, "doesn't contain any IP SANs")
	})
}

// learn writes the learnt control-plane addresses of a state dir.
func learn(t *testing.T, stateDir string, addrs ...string) {
	t.Helper()
	store, err := persist.New(stateDir, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveControlPlanes(addrs); err != nil {
		t.Fatal(err)
	}
}

func TestServerName(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"switchyard-controlplane.switchyard-system.svc:18000", "switchyard-controlplane.switchyard-system.svc"},
		{"10.0.0.5:18000", "10.0.0.5"},
		{"[fd00::5]:18000", "fd00::5"},
		{"dns:///cp.example.com:18000", "cp.example.com"},
		{"passthrough:///10.0.0.5:18000", "10.0.0.5"},
		{"cp.example.com", "cp.example.com"},
		{"unix:///run/switchyard/cp.sock", "localhost"},
	}
	for _, tc := range tests {
		if got := serverName(tc.addr); got != tc.want {
			t.Errorf("serverName(%q) = %q, want %q", tc.addr, got, tc.want)
		}
	}
}

// TestControlPlaneHelp: --help says how the dial order is built.
func TestControlPlaneHelp(t *testing.T) {
	var out strings.Builder
	if _, err := parseConfig([]string{"--help"}, &out, func(string) string { return "" }); err == nil {
		t.Fatal("--help returned no error")
	}
	for _, want := range []string{"control-planes.json", "control_plane_addresses", "first of these"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
}
