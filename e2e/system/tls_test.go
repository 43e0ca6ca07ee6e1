package system_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// subscribe opens a DeltaSnapshots stream to the control plane over mTLS
// with cert (none when nil), asks for node's view and returns the status
// of the first answer (OK when a response arrived).
func (e *env) subscribe(ctx context.Context, cert *tls.Certificate, node string) (codes.Code, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(e.c.Target, grpc.WithTransportCredentials(credentials.NewTLS(e.c.PKI.ClientTLS(cert))))
	if err != nil {
		return codes.Unknown, err
	}
	defer conn.Close()
	st, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(ctx)
	if err != nil {
		return status.Code(err), err
	}
	if err := st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: node, AgentVersion: "e2e-impostor"}}); err != nil {
		_, err = st.Recv()
		return status.Code(err), err
	}
	_, err = st.Recv()
	return status.Code(err), err
}

// testNodeIdentity: the tiers talk mTLS (the agents in this cluster got
// certificates for their own node and are settled). A client holding node-0's
// certificate cannot subscribe as node-1, one whose certificate names no
// node cannot subscribe at all, one without a certificate cannot even
// connect, and the real agents' streams are left alone.
func testNodeIdentity(t *testing.T, e *env) {
	ctx := t.Context()
	n0, n1 := e.c.Topo.Node(0).Name, e.c.Topo.Node(1).Name
	before, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node0, err := e.c.PKI.NodeCert(n0)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := e.c.PKI.ClientCert("switchyard-e2e-admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		as   string
		want codes.Code
	}{
		{"node-0's certificate as node-1", &node0, n1, codes.PermissionDenied},
		{"a certificate naming no node as node-0", &admin, n0, codes.PermissionDenied},
		{"no client certificate as node-0", nil, n0, codes.Unavailable},
	} {
		code, err := e.subscribe(ctx, tc.cert, tc.as)
		t.Logf("%s: %v", tc.name, err)
		if code != tc.want {
			t.Errorf("%s: got %v (%v), want %v", tc.name, code, err, tc.want)
		}
	}
	after, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{n0, n1} {
		b, a := before[name].GetConnectedSince().AsTime(), after[name].GetConnectedSince().AsTime()
		if !a.Equal(b) || !after[name].GetConnected() {
			t.Errorf("%s's agent stream was disturbed: connected %t, since %v, was %v", name, after[name].GetConnected(), a, b)
		}
	}
	e.settled(t, "node-identity")
}
