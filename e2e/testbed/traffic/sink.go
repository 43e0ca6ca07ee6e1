package traffic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Namespaces is the part of a test-bed topology this package needs:
// running a function with its thread inside one of its namespaces.
type Namespaces interface {
	Do(ns string, fn func() error) error
}

// Sink is a TCP server in one namespace (see the package doc).
type Sink struct {
	ln net.Listener
	wg sync.WaitGroup
}

// StartSink listens on addr (e.g. ":8080") inside ns and serves until
// Close.
func StartSink(n Namespaces, ns, addr string) (*Sink, error) {
	var ln net.Listener
	err := n.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sink in %s on %s: %w", ns, addr, err)
	}
	s := &Sink{ln: ln}
	s.wg.Go(s.serve)
	return s, nil
}

func (s *Sink) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		go serveConn(c)
	}
}

// serveConn counts until EOF and answers with the count; a reset
// connection (the connect and rate measurements) ends it quietly.
func serveConn(c net.Conn) {
	defer func() { _ = c.Close() }()
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		return
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	_, _ = c.Write(b[:])
}

// Close stops accepting and waits for the accept loop to end.
func (s *Sink) Close() error {
	err := s.ln.Close()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
