package servertest

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
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
	return lis.Addr().String(), Dial(t, lis.Addr().String())
}

// Discovery is a server of one discovery wire variant (*delta.Server,
// *sotw.Server).
type Discovery interface {
	switchyardv1.DiscoveryServiceServer
	Shutdown()
}

// ServeDiscovery serves srv as Serve does, shutting its sessions down
// first, and returns its address and a client connection.
func ServeDiscovery(t testing.TB, srv Discovery) (string, *grpc.ClientConn) {
	t.Helper()
	return Serve(t, func(g *grpc.Server) { switchyardv1.RegisterDiscoveryServiceServer(g, srv) }, srv.Shutdown)
}

// StreamOptions fills opts' zero fields with test defaults: a 5ms
// coalesce window, so tests wait little, and a debug logger to t.
func StreamOptions(t testing.TB, opts stream.Options) stream.Options {
	if opts.CoalesceWindow == 0 {
		opts.CoalesceWindow = 5 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = Logger(t)
	}
	return opts
}

// ServeAdmin serves srv's AdminService as Serve does and returns its
// address and a client.
func ServeAdmin(t testing.TB, srv switchyardv1.AdminServiceServer) (string, switchyardv1.AdminServiceClient) {
	t.Helper()
	addr, conn := Serve(t, func(g *grpc.Server) { switchyardv1.RegisterAdminServiceServer(g, srv) }, nil)
	return addr, switchyardv1.NewAdminServiceClient(conn)
}

// Dial returns a client connection to addr, closed when the test ends.
// It is insecure unless opts set other transport credentials.
func Dial(t testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// WaitTimeout bounds every wait on a server; tests never sleep.
const WaitTimeout = 10 * time.Second

// Eventually polls cond until it holds, and fails the test when it does
// not within WaitTimeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond) // poll interval, not a wait for an event
	}
}

// Logger logs through t at debug level.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
