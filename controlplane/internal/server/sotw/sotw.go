package sotw

import (
	"google.golang.org/grpc"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// RPC names this variant in metrics, logs and node status.
const RPC = "sotw"

type (
	request  = switchyardv1.StreamSnapshotsRequest
	response = switchyardv1.StreamSnapshotsResponse
)

// Server serves StreamSnapshots from a cache. DeltaSnapshots is left
// unimplemented; the wiring package combines it with package delta.
type Server struct {
	switchyardv1.UnimplementedDiscoveryServiceServer
	*stream.Endpoint
}

var _ switchyardv1.DiscoveryServiceServer = (*Server)(nil)

// New returns a server of c's views.
func New(c *cache.Cache, opts stream.Options) *Server {
	return &Server{Endpoint: stream.NewEndpoint(c, RPC, opts)}
}

// StreamSnapshots serves one agent's stream until it ends.
func (s *Server) StreamSnapshots(st grpc.BidiStreamingServer[request, response]) error {
	return stream.Serve[*request, *response](st, s.Cache, s.Opts, s.newVariant)
}

func (s *Server) newVariant(first *request) (stream.Variant[*response], error) {
	return &variant{
		applied: first.GetVersionInfo(),
		limit:   s.Opts.MaxMessageBytes,
		cpID:    s.Opts.ControlPlaneID,
	}, nil
}

// variant sends whole views.
type variant struct {
	applied string // version the agent has
	limit   int
	cpID    string
}

var _ stream.Variant[*response] = (*variant)(nil)

// Plan sends the whole view unless the agent has its version already.
func (v *variant) Plan(nv cache.NodeView, _ cache.Changes, _ bool) stream.Batch {
	if nv.Version() == v.applied {
		return stream.Batch{}
	}
	all := make([]*cache.View, 0, nv.Len())
	nv.Range(func(r *cache.View) bool {
		all = append(all, r)
		return true
	})
	envelope := stream.FieldSize(len(nv.Version())) +
		stream.FieldSize(stream.MaxNonceLen) +
		stream.FieldSize(len(v.cpID))
	parts := stream.Pack(all, nil, v.limit, envelope)
	if len(parts) == 0 {
		// An empty view is still a state to send.
		parts = []stream.Part{{}}
	}
	return stream.Batch{Parts: parts}
}

// Applied records the version the agent now has.
func (v *variant) Applied(target cache.NodeView) {
	v.applied = target.Version()
}

// Response wraps a part's pre-encoded resources without re-marshalling them.
func (v *variant) Response(p stream.Part, version, nonce string) *response {
	res := make([]*switchyardv1.Resource, len(p.Resources))
	for i, r := range p.Resources {
		res[i] = r.Raw()
	}
	return &response{
		VersionInfo:    version,
		Resources:      res,
		Nonce:          nonce,
		ControlPlaneId: v.cpID,
		ChangeTriggers: p.Triggers,
	}
}
