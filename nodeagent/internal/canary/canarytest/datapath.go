package canarytest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Datapath forwards a connection to a service's cluster IP and port, as
// the rules it is programmed with say, to where the service's first
// cluster endpoint listens. The zero value has no rules; it is safe for
// concurrent use, as the canary probes from its own goroutine.
type Datapath struct {
	mu      sync.Mutex
	rules   func() map[string]*switchyardv1.ServiceView
	faults  Faults
	listens map[string]string // the address asked for → the one listened on
	dials   int
}

// Faults stand in front of the rules; the zero value has none.
type Faults struct {
	// Broken, when set, is Dial's error, as of a foreign DROP in front of
	// the rules.
	Broken error
	// Foreign, when set, is where Dial connects instead, as when another
	// server answers the cluster IP.
	Foreign string
	// ListenErr, when set, is Listen's error (the canary's port taken).
	ListenErr error
}

// Program sets the rules: services returns the services they program,
// and is called at each Dial.
func (p *Datapath) Program(services func() map[string]*switchyardv1.ServiceView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = services
}

// SetFaults replaces the faults; Faults{} repairs the datapath.
func (p *Datapath) SetFaults(f Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// Dials counts the connections asked for.
func (p *Datapath) Dials() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}

// Listens counts the addresses listened on.
func (p *Datapath) Listens() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.listens)
}

// Listen listens on a free loopback port for addr.
func (p *Datapath) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	p.mu.Lock()
	err := p.faults.ListenErr
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, network, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listens == nil {
		p.listens = map[string]string{}
	}
	p.listens[addr] = l.Addr().String()
	return l, nil
}

// Dial connects to where the rules forward addr.
func (p *Datapath) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	p.mu.Lock()
	p.dials++
	to, err := p.forward(addr)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return (&net.Dialer{}).DialContext(ctx, network, to)
}

// forward is the rules' DNAT: a cluster IP and port to the service's
// first endpoint, then to the loopback port its listener really has.
func (p *Datapath) forward(addr string) (string, error) {
	if p.faults.Broken != nil {
		return "", p.faults.Broken
	}
	if p.faults.Foreign != "" {
		return p.faults.Foreign, nil
	}
	var services map[string]*switchyardv1.ServiceView
	if p.rules != nil {
		services = p.rules()
	}
	for _, sv := range services {
		if len(sv.GetClusterIps()) == 0 || len(sv.GetClusterEndpoints()) == 0 {
			continue
		}
		for _, port := range sv.GetPorts() {
			if net.JoinHostPort(sv.GetClusterIps()[0], fmt.Sprint(port.GetPort())) != addr {
				continue
			}
			ep := sv.GetClusterEndpoints()[0]
			if to, ok := p.listens[net.JoinHostPort(ep.GetAddress(), fmt.Sprint(ep.GetPorts()[0].GetPort()))]; ok {
				return to, nil
			}
			return "", fmt.Errorf("dial %s: nothing listens on the endpoint: %w", addr, syscall.ECONNREFUSED)
		}
	}
	return "", fmt.Errorf("dial %s: no rule forwards it: %w", addr, syscall.ECONNREFUSED)
}
