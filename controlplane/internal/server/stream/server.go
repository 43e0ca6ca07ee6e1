package stream

import (
	"sync"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
)

// Endpoint is what every wire variant's gRPC server shares: the cache it
// serves from, its session options and a shutdown that ends all of its
// sessions with codes.Unavailable.
type Endpoint struct {
	Cache *cache.Cache
	Opts  Options

	closing chan struct{}
	once    sync.Once
}

// NewEndpoint returns an Endpoint for the variant named rpc; opts.RPC and
// opts.Closing are set here.
func NewEndpoint(c *cache.Cache, rpc string, opts Options) *Endpoint {
	e := &Endpoint{Cache: c, closing: make(chan struct{})}
	opts.RPC, opts.Closing = rpc, e.closing
	e.Opts = opts.WithDefaults()
	return e
}

// Shutdown ends every open session, so agents reconnect to another
// replica. Idempotent.
func (e *Endpoint) Shutdown() {
	e.once.Do(func() { close(e.closing) })
}
