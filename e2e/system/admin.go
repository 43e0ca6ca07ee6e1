package system

import (
	"context"
	"fmt"
	"time"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ListNodes asks replica 0's AdminService.
func (c *Cluster) ListNodes(ctx context.Context) ([]*switchyardv1.NodeStatus, error) {
	return c.ListNodesAt(ctx, 0)
}

// adminAt makes call on replica i's AdminService with rpc; an error names
// the call and the replica.
func adminAt[R any](c *Cluster, i int, call string, rpc func(switchyardv1.AdminServiceClient) (R, error)) (R, error) {
	resp, err := rpc(switchyardv1.NewAdminServiceClient(c.cps[i].conn))
	if err != nil {
		var none R
		return none, fmt.Errorf("%s on %s: %w", call, c.cps[i].id, err)
	}
	return resp, nil
}

// listNodesAt is replica i's whole ListNodes answer.
func (c *Cluster) listNodesAt(ctx context.Context, i int) (*switchyardv1.ListNodesResponse, error) {
	return adminAt(c, i, "ListNodes", func(a switchyardv1.AdminServiceClient) (*switchyardv1.ListNodesResponse, error) {
		return a.ListNodes(ctx, &switchyardv1.ListNodesRequest{})
	})
}

// ListNodesAt asks replica i's AdminService.
func (c *Cluster) ListNodesAt(ctx context.Context, i int) ([]*switchyardv1.NodeStatus, error) {
	resp, err := c.listNodesAt(ctx, i)
	return resp.GetNodes(), err
}

// APIWatchAt returns what replica i's ListNodes says of its watch of the
// Kubernetes API.
func (c *Cluster) APIWatchAt(ctx context.Context, i int) (*switchyardv1.ApiWatchStatus, error) {
	resp, err := c.listNodesAt(ctx, i)
	return resp.GetApi(), err
}

// GetServiceAt asks replica i's AdminService for one service's per-node
// status: its view on each node and whether the node acknowledged it.
func (c *Cluster) GetServiceAt(ctx context.Context, i int, namespace, name string) ([]*switchyardv1.ServiceNodeStatus, error) {
	resp, err := c.ServiceAt(ctx, i, namespace, name)
	return resp.GetNodes(), err
}

// Settled reports whether, on replica 0, every node's agent is connected
// and has acked the version the control plane wants it to have.
func (c *Cluster) Settled(ctx context.Context) (bool, error) { return c.SettledAt(ctx, 0) }

// SettledAt is Settled as replica i sees it.
func (c *Cluster) SettledAt(ctx context.Context, i int) (bool, error) {
	nodes, err := c.ListNodesAt(ctx, i)
	if err != nil {
		return false, err
	}
	return Settled(nodes, c.nodeIDs), nil
}

// Settled reports whether every one of names is connected in nodes with
// its acked version equal to its (non-empty) desired version.
func Settled(nodes []*switchyardv1.NodeStatus, names []string) bool {
	acked := map[string]bool{}
	for _, n := range nodes {
		acked[n.GetName()] = n.GetConnected() && n.GetDesiredVersion() != "" && n.GetAckedVersion() == n.GetDesiredVersion()
	}
	for _, name := range names {
		if !acked[name] {
			return false
		}
	}
	return true
}

// WaitSettled polls Settled until it holds or ctx ends.
func (c *Cluster) WaitSettled(ctx context.Context) error { return c.WaitSettledAt(ctx, 0) }

// WaitSettledAt polls SettledAt(i) until it holds or ctx ends.
func (c *Cluster) WaitSettledAt(ctx context.Context, i int) error {
	for {
		ok, err := c.SettledAt(ctx, i)
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agents not settled on %s (last error: %v): %w", c.cps[i].id, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// NodeNames returns the names of the cluster's nodes, in index order.
func (c *Cluster) NodeNames() []string { return append([]string(nil), c.nodeIDs...) }

// ExplainAt asks replica i's AdminService what a node does with a packet.
func (c *Cluster) ExplainAt(ctx context.Context, i int, req *switchyardv1.ExplainRequest) (*switchyardv1.ExplainResponse, error) {
	return adminAt(c, i, "Explain", func(a switchyardv1.AdminServiceClient) (*switchyardv1.ExplainResponse, error) {
		return a.Explain(ctx, req)
	})
}

// NodeViewAt returns the view replica i wants node to program
// (GetNodeView).
func (c *Cluster) NodeViewAt(ctx context.Context, i int, node string) (*switchyardv1.GetNodeViewResponse, error) {
	return adminAt(c, i, "GetNodeView "+node, func(a switchyardv1.AdminServiceClient) (*switchyardv1.GetNodeViewResponse, error) {
		return a.GetNodeView(ctx, &switchyardv1.GetNodeViewRequest{NodeName: node})
	})
}
