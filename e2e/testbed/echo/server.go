package echo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Server is a bound echo server. Listen binds; Serve answers until its
// context ends.
type Server struct {
	cfg Config
	log *slog.Logger
	tcp net.Listener
	udp net.PacketConn
}

// Listen binds the configured sockets in the calling thread's namespace.
func Listen(cfg Config, log *slog.Logger) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log}
	var err error
	if cfg.TCP != "" {
		if s.tcp, err = net.Listen("tcp", cfg.TCP); err != nil {
			return nil, fmt.Errorf("echo: listen tcp %s: %w", cfg.TCP, err)
		}
	}
	if cfg.UDP != "" {
		if s.udp, err = net.ListenPacket("udp", cfg.UDP); err != nil {
			s.close()
			return nil, fmt.Errorf("echo: listen udp %s: %w", cfg.UDP, err)
		}
	}
	return s, nil
}

// TCPAddr returns the bound TCP address, or nil.
func (s *Server) TCPAddr() net.Addr {
	if s.tcp == nil {
		return nil
	}
	return s.tcp.Addr()
}

// UDPAddr returns the bound UDP address, or nil.
func (s *Server) UDPAddr() net.Addr {
	if s.udp == nil {
		return nil
	}
	return s.udp.LocalAddr()
}

func (s *Server) close() {
	if s.tcp != nil {
		s.tcp.Close()
	}
	if s.udp != nil {
		s.udp.Close()
	}
}

// Serve answers until ctx is done, then closes the sockets and waits for
// open conversations. It returns nil after a normal shutdown.
func (s *Server) Serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		<-gctx.Done()
		s.close()
		return nil
	})
	if s.tcp != nil {
		g.Go(func() error { return s.serveTCP(gctx) })
	}
	if s.udp != nil {
		g.Go(func() error { return s.serveUDP(gctx) })
	}
	return g.Wait()
}

func (s *Server) serveTCP(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := s.tcp.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("echo: accept: %w", err)
		}
		wg.Go(func() { s.handleTCP(ctx, conn) })
	}
}

func (s *Server) handleTCP(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	idle := s.cfg.withDefaults().IdleTimeout
	if err := conn.SetDeadline(time.Now().Add(idle)); err != nil {
		return
	}
	client := ""
	if s.cfg.ReportClient {
		client = conn.RemoteAddr().String()
	}
	if _, err := io.WriteString(conn, Reply(s.cfg.Name, client)+"\n"); err != nil {
		s.log.Debug("write reply", "client", conn.RemoteAddr().String(), "err", err)
		return
	}
	if s.cfg.Mode == ModeEcho {
		echoUntilIdle(conn, idle)
	}
}

func (s *Server) serveUDP(ctx context.Context) error {
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := s.udp.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("echo: read udp: %w", err)
		}
		client := ""
		if s.cfg.ReportClient {
			client = addr.String()
		}
		reply := []byte(Reply(s.cfg.Name, client))
		if s.cfg.Mode == ModeEcho {
			reply = append(append(reply, '\n'), buf[:n]...)
		}
		if _, err := s.udp.WriteTo(reply, addr); err != nil {
			s.log.Debug("write udp reply", "client", addr.String(), "err", err)
		}
	}
}

// echoUntilIdle writes back what conn sends until it closes, fails, or
// stays silent for idle: each read moves the deadline.
func echoUntilIdle(conn net.Conn, idle time.Duration) {
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
		if err := conn.SetDeadline(time.Now().Add(idle)); err != nil {
			return
		}
	}
}
