package admin

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/settings"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Source is what the admin service reads; *cache.Cache implements it.
type Source interface {
	Snapshot() []cache.NodeSnapshot
	View(node string) (cache.NodeView, bool)
}

var _ Source = (*cache.Cache)(nil)

// APIWatch is the control plane's watch of the Kubernetes API;
// *apistatus.Tracker implements it.
type APIWatch interface {
	Snapshot() []apistatus.Status
	Outage() time.Time
}

var _ APIWatch = (*apistatus.Tracker)(nil)

// Settings is where this replica's NodeConfig settings come from;
// *settings.Source implements it.
type Settings interface {
	Status() settings.Status
}

var _ Settings = (*settings.Source)(nil)

// Server implements AdminService.
type Server struct {
	switchyardv1.UnimplementedAdminServiceServer
	src      Source
	api      APIWatch
	settings Settings
	rollout  Rollout
	latency  Latency // nil: GetService reports no latency
}

var _ switchyardv1.AdminServiceServer = (*Server)(nil)

// New returns an admin server reading src and, unless they are nil, the
// state of the API watch and the settings' source.
func New(src Source, api APIWatch, st Settings) *Server {
	return &Server{src: src, api: api, settings: st}
}

// settingsStatus is the settings' source for responses; nil without one.
func (s *Server) settingsStatus() *switchyardv1.ControlPlaneSettings {
	if s.settings == nil {
		return nil
	}
	st := s.settings.Status()
	return &switchyardv1.ControlPlaneSettings{
		Hash: st.Hash, Source: st.Source, ConfigMap: st.ConfigMap, ResourceVersion: st.ResourceVersion,
		Error: st.Error, ErrorSince: timestamp(st.ErrorSince),
	}
}

// apiWatch is the API watch's status for responses; nil without one.
func (s *Server) apiWatch() *switchyardv1.ApiWatchStatus {
	if s.api == nil {
		return nil
	}
	out := &switchyardv1.ApiWatchStatus{UnavailableSince: timestamp(s.api.Outage())}
	out.ViewsMayBeStale = out.UnavailableSince != nil
	for _, r := range s.api.Snapshot() {
		out.Resources = append(out.Resources, &switchyardv1.ApiResourceStatus{
			Resource: r.Resource, State: r.State.String(), UnavailableSince: timestamp(r.Since),
			LastError: r.LastError, Errors: r.Errors,
		})
	}
	return out
}

// ListNodes returns every node the control plane knows or that has an agent
// connected, sorted by name.
func (s *Server) ListNodes(context.Context, *switchyardv1.ListNodesRequest) (*switchyardv1.ListNodesResponse, error) {
	snaps := s.src.Snapshot()
	resp := &switchyardv1.ListNodesResponse{Nodes: make([]*switchyardv1.NodeStatus, 0, len(snaps)),
		Api: s.apiWatch(), Settings: s.settingsStatus()}
	for _, sn := range snaps {
		cfg := nodeConfig(sn.View, sn.Status.Name)
		resp.Nodes = append(resp.Nodes, s.settingsOf(nodeStatus(sn, cfg), cfg))
	}
	return resp, nil
}

// nodeStatus is sn's status; cfg is its desired NodeConfig (nil: none).
func nodeStatus(sn cache.NodeSnapshot, cfg *switchyardv1.NodeConfig) *switchyardv1.NodeStatus {
	st := sn.Status
	out := &switchyardv1.NodeStatus{
		Name:                       st.Name,
		Zone:                       cfg.GetZone(),
		Connected:                  st.Connected,
		Agent:                      st.Agent,
		ConnectedSince:             timestamp(st.ConnectedSince),
		DesiredVersion:             st.DesiredVersion,
		AckedVersion:               st.AckedVersion,
		LastNack:                   st.LastNack,
		LastNackTime:               timestamp(st.LastNackTime),
		LastApplyDuration:          duration(st.LastApplyDuration),
		LastProgrammingLatency:     duration(st.LastProgrammingLatency),
		ResourceCount:              uint32(st.Resources),
		LastAckTime:                timestamp(st.LastAck),
		Rpc:                        st.RPC,
		SettingsHash:               st.Agent.GetSettingsHash(),
		Drift:                      st.Drift,
		Datapath:                   st.Datapath,
		NodeObject:                 switchyardv1.NodeObject_NODE_OBJECT_PRESENT,
		LastProgrammingLatencyTime: timestamp(st.LastProgrammingLatencyTime),
	}
	if !st.Known {
		out.NodeObject = switchyardv1.NodeObject_NODE_OBJECT_MISSING
	}
	if !st.Connected {
		out.ConnectedSince = nil
	}
	return out
}

// nodeConfig decodes the node's NodeConfig resource, named after it: nil
// when the view has no readable resource of that name, empty when that
// resource is not a NodeConfig. Views keep their bytes only (the one form
// they are sent in), so the admin service, which needs the message,
// decodes it: once per node and call.
func nodeConfig(nv cache.NodeView, node string) *switchyardv1.NodeConfig {
	if nv == nil {
		return nil
	}
	v, ok := nv.Get(node)
	if !ok {
		return nil
	}
	r, err := cache.Decode(v)
	if err != nil {
		return nil
	}
	if nc := r.GetNodeConfig(); nc != nil {
		return nc
	}
	return &switchyardv1.NodeConfig{}
}

func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func duration(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// GetNodeView returns a node's newest view as the control plane would send
// it; NotFound when the node has no view.
func (s *Server) GetNodeView(_ context.Context, req *switchyardv1.GetNodeViewRequest) (*switchyardv1.GetNodeViewResponse, error) {
	if req.GetNodeName() == "" {
		return nil, status.Error(codes.InvalidArgument, "node_name is required")
	}
	nv, ok := s.src.View(req.GetNodeName())
	if !ok {
		return nil, status.Errorf(codes.NotFound,
			"node %q has no view: the control plane sees no Node object of that name (views are computed for Nodes only; a connected agent keeps its last applied rules until the Node exists)",
			req.GetNodeName())
	}
	resp := &switchyardv1.GetNodeViewResponse{
		Version:         nv.Version(),
		Resources:       make([]*switchyardv1.Resource, 0, nv.Len()),
		ViewsMayBeStale: s.api != nil && !s.api.Outage().IsZero(),
	}
	nv.Range(func(v *cache.View) bool {
		resp.Resources = append(resp.Resources, v.Raw())
		return true
	})
	return resp, nil
}

// GetService returns one service's view on every node that has it, sorted
// by node name, whether each node acknowledged that version, on how many
// it is applied and the fleet's programming latency of its latest change;
// NotFound when no node has it.
func (s *Server) GetService(_ context.Context, req *switchyardv1.GetServiceRequest) (*switchyardv1.GetServiceResponse, error) {
	if req.GetNamespace() == "" || req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "namespace and name are required")
	}
	name := req.GetNamespace() + "/" + req.GetName()
	// Views are shared across nodes: decode each version once.
	decoded := map[string]*switchyardv1.ServiceView{}
	resp := &switchyardv1.GetServiceResponse{}
	for _, sn := range s.src.Snapshot() {
		if sn.View == nil {
			continue
		}
		v, ok := sn.View.Get(name)
		if !ok {
			continue
		}
		sv, ok := decoded[v.Version]
		if !ok {
			r, err := cache.Decode(v)
			if err != nil {
				return nil, status.Errorf(codes.Internal, "node %q: %v", sn.Status.Name, err)
			}
			sv = r.GetService()
			decoded[v.Version] = sv
		}
		acked := ackedAt(sn.Acked, name, v.Version)
		if acked {
			resp.AppliedNodes++
		}
		resp.Nodes = append(resp.Nodes, &switchyardv1.ServiceNodeStatus{
			NodeName:       sn.Status.Name,
			DesiredVersion: v.Version,
			Acked:          acked,
			View:           sv,
		})
	}
	if len(resp.Nodes) == 0 {
		return nil, status.Errorf(codes.NotFound, "service %q is on no node", name)
	}
	resp.TotalNodes = uint32(len(resp.Nodes))
	s.addLatency(resp, name)
	return resp, nil
}

// ackedAt reports whether the acknowledged view has name at version.
func ackedAt(acked cache.NodeView, name, version string) bool {
	if acked == nil {
		return false
	}
	v, ok := acked.Get(name)
	return ok && v.Version == version
}
