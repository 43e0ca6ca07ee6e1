package delta

import (
	"slices"

	"google.golang.org/grpc"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// RPC names this variant in metrics, logs and node status.
const RPC = "delta"

type (
	request  = switchyardv1.DeltaSnapshotsRequest
	response = switchyardv1.DeltaSnapshotsResponse
)

// Server serves DeltaSnapshots from a cache. StreamSnapshots is left
// unimplemented; the wiring package combines it with package sotw.
type Server struct {
	switchyardv1.UnimplementedDiscoveryServiceServer
	*stream.Endpoint
}

var _ switchyardv1.DiscoveryServiceServer = (*Server)(nil)

// New returns a server of c's views.
func New(c *cache.Cache, opts stream.Options) *Server {
	return &Server{Endpoint: stream.NewEndpoint(c, RPC, opts)}
}

// DeltaSnapshots serves one agent's stream until it ends.
func (s *Server) DeltaSnapshots(st grpc.BidiStreamingServer[request, response]) error {
	return stream.Serve[*request, *response](st, s.Cache, s.Opts, s.newVariant)
}

// ResumeObserver is told what each stream's first batch costs. It is
// optional: the session's stream.Observer is used when it implements it
// (*metrics.Metrics does).
type ResumeObserver interface {
	// DeltaStreamStarted reports the node view's resources at a stream's
	// first batch: resumed, the agent declared them at their current version
	// in initial_resource_versions so they were not sent; sent, the rest. A
	// reconnect that resumes sends only the difference; a full resend has
	// resumed == 0.
	DeltaStreamStarted(resumed, sent int)
}

func (s *Server) newVariant(first *request) (stream.Variant[*response], error) {
	obs, _ := s.Opts.Observer.(ResumeObserver)
	return &variant{
		known: initial(first.GetInitialResourceVersions()),
		limit: s.Opts.MaxMessageBytes,
		cpID:  s.Opts.ControlPlaneID,
		obs:   obs,
	}, nil
}

// state is what the agent has applied: a version by resource name.
type state interface {
	version(name string) (string, bool)
	names(fn func(name string))
}

// initial is the state an agent declared on its first request.
type initial map[string]string

func (m initial) version(name string) (string, bool) {
	v, ok := m[name]
	return v, ok
}

func (m initial) names(fn func(string)) {
	for name := range m {
		fn(name)
	}
}

// applied is a view the agent acknowledged.
type applied struct{ nv cache.NodeView }

func (a applied) version(name string) (string, bool) {
	v, ok := a.nv.Get(name)
	if !ok {
		return "", false
	}
	return v.Version, true
}

func (a applied) names(fn func(string)) {
	a.nv.Range(func(v *cache.View) bool {
		fn(v.Name)
		return true
	})
}

// variant computes one stream's deltas.
type variant struct {
	known state
	limit int
	cpID  string
	obs   ResumeObserver // nil: not reported
}

var _ stream.Variant[*response] = (*variant)(nil)

// Plan diffs nv against the agent's state over the changed names. The first
// batch is never empty, so the agent learns the system version it is at.
func (v *variant) Plan(nv cache.NodeView, changes cache.Changes, first bool) stream.Batch {
	var res []*cache.View
	var removed []string
	if changes.All {
		res, removed = v.diffAll(nv)
	} else {
		res, removed = v.diffNames(nv, changes.Names)
	}
	if first && v.obs != nil {
		v.obs.DeltaStreamStarted(v.resumed(nv), len(res))
	}
	if len(res) == 0 && len(removed) == 0 {
		if first {
			return stream.Batch{Parts: []stream.Part{{}}}
		}
		return stream.Batch{}
	}
	envelope := stream.FieldSize(len(nv.Version())) +
		stream.FieldSize(stream.MaxNonceLen) +
		stream.FieldSize(len(v.cpID))
	return stream.Batch{Parts: stream.Pack(res, removed, v.limit, envelope)}
}

func (v *variant) diffAll(nv cache.NodeView) ([]*cache.View, []string) {
	var res []*cache.View
	nv.Range(func(r *cache.View) bool {
		if have, ok := v.known.version(r.Name); !ok || have != r.Version {
			res = append(res, r)
		}
		return true
	})
	var removed []string
	v.known.names(func(name string) {
		if _, ok := nv.Get(name); !ok {
			removed = append(removed, name)
		}
	})
	slices.Sort(removed)
	return res, removed
}

// diffNames diffs the given names, which are sorted.
func (v *variant) diffNames(nv cache.NodeView, names []string) ([]*cache.View, []string) {
	var res []*cache.View
	var removed []string
	for _, name := range names {
		have, known := v.known.version(name)
		r, ok := nv.Get(name)
		switch {
		case ok && (!known || have != r.Version):
			res = append(res, r)
		case !ok && known:
			removed = append(removed, name)
		}
	}
	return res, removed
}

// resumed counts nv's resources the agent has at their current version.
func (v *variant) resumed(nv cache.NodeView) int {
	if m, ok := v.known.(initial); ok && len(m) == 0 {
		// A fresh agent: no walk of the view (10k names) to count none.
		return 0
	}
	n := 0
	nv.Range(func(r *cache.View) bool {
		if have, ok := v.known.version(r.Name); ok && have == r.Version {
			n++
		}
		return true
	})
	return n
}

// Applied makes target the agent's state.
func (v *variant) Applied(target cache.NodeView) {
	v.known = applied{nv: target}
}

// Response wraps a part's pre-encoded resources without re-marshalling them.
func (v *variant) Response(p stream.Part, version, nonce string) *response {
	res := make([]*switchyardv1.Resource, len(p.Resources))
	for i, r := range p.Resources {
		res[i] = r.Raw()
	}
	return &response{
		SystemVersion:    version,
		Resources:        res,
		RemovedResources: p.Removed,
		Nonce:            nonce,
		ControlPlaneId:   v.cpID,
		ChangeTriggers:   p.Triggers,
	}
}
