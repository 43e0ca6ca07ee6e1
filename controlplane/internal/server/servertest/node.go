package servertest

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
)

// NodeStatus returns node's status in c, or a zero one.
func NodeStatus(c *cache.Cache, node string) cache.NodeStatus {
	s, _ := c.Node(node)
	return s.Status
}

// WaitAcked waits until c records that node's agent acknowledged version.
func WaitAcked(t testing.TB, c *cache.Cache, node, version string) {
	t.Helper()
	Eventually(t, node+"'s ACK of "+version, func() bool { return NodeStatus(c, node).AckedVersion == version })
}

// Published returns a new cache in which node has a view of views, and
// that view: where most stream tests start.
func Published(node string, views ...*cache.View) (*cache.Cache, *cachetest.NodeView) {
	c := cache.New()
	nv := cachetest.NewNodeView(views...)
	c.Publish(node, nv, nil)
	return c, nv
}
