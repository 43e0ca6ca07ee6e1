// Package servertest runs the control plane's gRPC services on loopback
// for tests: a real server, a real client connection, torn down with the
// test.
package servertest

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Serve runs a gRPC server on 127.0.0.1 with the services register adds,
// until the test ends, and returns its address and a client connection.
// On cleanup stop (may be nil; e.g. a variant's Shutdown) runs before the
// server stops, and Stop waits for the handlers to return.
func Serve(t testing.TB, register func(*grpc.Server), stop func()) (string, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.WaitForHandlers(true))
	register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	t.Cleanup(func() {
		if stop != nil {
			stop()
		}
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return lis.Addr().String(), conn
}
