package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// nobodyTakesANode: on deploy/ as shipped, a client that reaches a
// control plane cannot subscribe as a connected node — receive that
// node's view, and take its stream from the real agent — without that
// node's certificate: not in plaintext, not over TLS without a client
// certificate, not with another node's kubelet certificate. The real
// agent's stream stays the one it opened. (On the old plaintext base all
// three received node-0's view and replaced its agent's stream.)
func nobodyTakesANode(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	before := connections(ctx, t, c)
	victim := cluster.NodeName(0)
	if _, ok := before[victim]; !ok {
		t.Fatalf("%s is not connected: %v", victim, before)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.ControlPlaneCA()) {
		t.Fatal("the install's CA is not known: is it TLS?")
	}
	pem, err := c.KubeletClientCert(1)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tls.LoadX509KeyPair(pem, pem)
	if err != nil {
		t.Fatalf("node-1's kubelet certificate: %v", err)
	}
	attempts := []struct {
		name  string
		creds credentials.TransportCredentials
		want  []codes.Code
	}{
		{"plaintext", insecure.NewCredentials(), []codes.Code{codes.Unavailable}},
		// The server demands a client certificate: the handshake fails
		// (TLS 1.3 reports it on the first read) or the stream does.
		{"TLS without a client certificate", credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
			[]codes.Code{codes.Unavailable}},
		{"TLS with node-1's kubelet certificate", credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{other}}),
			[]codes.Code{codes.PermissionDenied}},
	}
	refused := 0
	for _, a := range attempts {
		got := subscribeAs(ctx, t, c, a.creds, victim)
		ok := false
		for _, w := range a.want {
			ok = ok || status.Code(got) == w
		}
		if ok {
			refused++
		} else {
			t.Errorf("%s subscribing as %s: %v, want one of %v", a.name, victim, got, a.want)
		}
	}
	t.Logf("subscribing as %s without its certificate: %d of %d attempts refused", victim, refused, len(attempts))
	after := connections(ctx, t, c)
	for name, since := range before {
		if after[name] != since {
			t.Errorf("%s's agent stream was replaced (connected since %v, now %v)", name, since, after[name])
		}
	}
}

// subscribeAs opens a delta stream as node on every replica that answers
// and returns the first error; nil when some replica sent a view.
func subscribeAs(ctx context.Context, t *testing.T, c *cluster.Cluster, creds credentials.TransportCredentials, node string) error {
	t.Helper()
	var first error
	for i := range c.Nodes() {
		conn, err := c.DialControlPlane(i, creds)
		if err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = func() error {
			st, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(sctx)
			if err != nil {
				return err
			}
			if err := st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: node, AgentVersion: "intruder"}}); err != nil {
				_, err = st.Recv() // the status is delivered with the receive
				return err
			}
			r, err := st.Recv()
			if err == nil {
				return fmt.Errorf("received %s's view (version %s, %d resources)", node, r.GetSystemVersion(), len(r.GetResources()))
			}
			return err
		}()
		cancel()
		conn.Close()
		if status.Code(err) == codes.Unavailable && isNoReplica(err) {
			continue // nothing listens on this node
		}
		if err == nil || status.Code(err) == codes.Unknown {
			return fmt.Errorf("replica on %s: %w", cluster.NodeName(i), err)
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// isNoReplica: the dial was refused, no replica runs on that node.
func isNoReplica(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection refused")
}

// connections maps every connected node to when its stream opened.
func connections(ctx context.Context, t *testing.T, c *cluster.Cluster) map[string]time.Time {
	t.Helper()
	_, nodes, err := c.Settled(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]time.Time{}
	for _, n := range nodes {
		m[n.GetName()] = n.GetConnectedSince().AsTime()
	}
	return m
}
