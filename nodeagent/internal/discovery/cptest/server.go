package cptest

import (
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Timeout bounds every wait of this package.
const Timeout = 10 * time.Second

// Request is one request the agent sent.
type Request struct {
	// Stream numbers the streams this server accepted, from 1.
	Stream int
	// Peer is the connection the request came on; with TLS its AuthInfo
	// is a credentials.TLSInfo holding the verified client certificate.
	Peer *peer.Peer
	*switchyardv1.DeltaSnapshotsRequest
}

// Option configures a Server.
type Option func(*Server)

// WithTLS serves TLS with cfg; set cfg.ClientAuth to
// tls.RequireAndVerifyClientCert (and cfg.ClientCAs) for mTLS.
func WithTLS(cfg *tls.Config) Option {
	return func(s *Server) {
		s.opts = append(s.opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
}

// Server is a scripted control plane.
type Server struct {
	switchyardv1.UnimplementedDiscoveryServiceServer
	t    testing.TB
	addr string
	opts []grpc.ServerOption

	reqs chan Request

	mu      sync.Mutex
	grpc    *grpc.Server
	served  chan struct{}
	streams int
	cur     *stream
}

type stream struct {
	n    int
	out  chan *switchyardv1.DeltaSnapshotsResponse
	kill chan error
}

// New serves on a free loopback port until the test ends; plaintext unless
// WithTLS is given.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cptest: listen: %v", err)
	}
	s := &Server{t: t, addr: l.Addr().String(), reqs: make(chan Request, 1024)}
	for _, o := range opts {
		o(s)
	}
	s.serve(l)
	t.Cleanup(s.Stop)
	return s
}

// Addr is the address the server listens on, the same across Restart.
func (s *Server) Addr() string { return s.addr }

func (s *Server) serve(l net.Listener) {
	g := grpc.NewServer(s.opts...)
	switchyardv1.RegisterDiscoveryServiceServer(g, s)
	served := make(chan struct{})
	s.mu.Lock()
	s.grpc, s.served = g, served
	s.mu.Unlock()
	go func() {
		defer close(served)
		_ = g.Serve(l)
	}()
}

// Stop ends every stream and stops listening; the address refuses
// connections until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	g, served := s.grpc, s.served
	s.grpc, s.cur = nil, nil
	s.mu.Unlock()
	if g == nil {
		return
	}
	g.Stop()
	<-served
}

// Restart serves again on the same address.
func (s *Server) Restart() {
	s.t.Helper()
	var l net.Listener
	deadline := time.Now().Add(Timeout)
	for {
		var err error
		if l, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("cptest: relisten on %s: %v", s.addr, err)
		}
		time.Sleep(10 * time.Millisecond) // poll: the port is being released
	}
	s.serve(l)
}

// Streams counts the streams accepted so far.
func (s *Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams
}

// DeltaSnapshots implements the service: it forwards requests to the test
// and sends what the test pushes.
func (s *Server) DeltaSnapshots(ss grpc.BidiStreamingServer[switchyardv1.DeltaSnapshotsRequest, switchyardv1.DeltaSnapshotsResponse]) error {
	s.mu.Lock()
	s.streams++
	st := &stream{n: s.streams, out: make(chan *switchyardv1.DeltaSnapshotsResponse, 64), kill: make(chan error, 1)}
	s.cur = st
	s.mu.Unlock()
	p, _ := peer.FromContext(ss.Context())
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			req, err := ss.Recv()
			if err != nil {
				return
			}
			s.reqs <- Request{Stream: st.n, Peer: p, DeltaSnapshotsRequest: req}
		}
	}()
	defer func() {
		s.mu.Lock()
		if s.cur == st {
			s.cur = nil
		}
		s.mu.Unlock()
	}()
	for {
		select {
		case <-ss.Context().Done():
			return ss.Context().Err()
		case <-recvDone:
			return nil
		case err := <-st.kill:
			return err
		case resp := <-st.out:
			if err := ss.Send(resp); err != nil {
				return err
			}
		}
	}
}

func (s *Server) current() *stream {
	s.t.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		s.mu.Lock()
		st := s.cur
		s.mu.Unlock()
		if st != nil {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("cptest %s: no stream within %v", s.addr, Timeout)
		}
		time.Sleep(5 * time.Millisecond) // poll for the condition
	}
}

// Push sends resp on the current stream, waiting for one to exist.
func (s *Server) Push(resp *switchyardv1.DeltaSnapshotsResponse) {
	s.t.Helper()
	s.current().out <- resp
}

// EndStream ends the current stream with err (e.g. a status.Error).
func (s *Server) EndStream(err error) {
	s.t.Helper()
	s.current().kill <- err
}

// Next returns the next request the agent sent, failing the test after
// Timeout.
func (s *Server) Next() Request {
	s.t.Helper()
	select {
	case r := <-s.reqs:
		return r
	case <-time.After(Timeout):
		s.t.Fatalf("cptest %s: no request within %v", s.addr, Timeout)
		return Request{}
	}
}

// NoRequest fails the test when a request is already queued.
func (s *Server) NoRequest() {
	s.t.Helper()
	select {
	case r := <-s.reqs:
		s.t.Fatalf("cptest %s: unexpected request %v", s.addr, r)
	default:
	}
}
