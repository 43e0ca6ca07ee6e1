package healthchecktest

import (
	"net"
	"sync"
)

// Ports maps the node ports a test's services name to the free loopback
// ports they listen on. The zero value is ready; it is safe for
// concurrent use, as the health check servers listen from their own
// goroutines.
type Ports struct {
	mu    sync.Mutex
	addrs map[uint32]string
}

// Listen listens for node port port on a free loopback port; it is a
// healthcheck.Config.Listen.
func (p *Ports) Listen(port uint32) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addrs == nil {
		p.addrs = map[uint32]string{}
	}
	p.addrs[port] = l.Addr().String()
	return l, nil
}

// Addr is where node port port listens last, "" before it does.
func (p *Ports) Addr(port uint32) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addrs[port]
}
