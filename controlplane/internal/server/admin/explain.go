package admin

import (
	"context"
	"fmt"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/explain"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// modeNames maps the API's modes to the explainer's. Dry-run programs
// nothing; it is explained as the agent's default would program it.
var modeNames = map[switchyardv1.DataplaneMode]string{
	switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES:  explain.ModeIPTables,
	switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS:      explain.ModeIPVS,
	switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES:  explain.ModeNFTables,
	switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE: explain.ModeUserspace,
}

var actions = map[explain.Action]switchyardv1.ExplainAction{
	explain.Forward: switchyardv1.ExplainAction_EXPLAIN_ACTION_FORWARD,
	explain.Reject:  switchyardv1.ExplainAction_EXPLAIN_ACTION_REJECT,
	explain.Drop:    switchyardv1.ExplainAction_EXPLAIN_ACTION_DROP,
	explain.Pass:    switchyardv1.ExplainAction_EXPLAIN_ACTION_PASS,
}

// Explain says what one node does with one packet, from the view it
// acknowledged (or, on request or before any ACK, the desired one) and
// the mode it runs, with dataplane/explain: the same reading of a view
// every mode's rules come from.
func (s *Server) Explain(_ context.Context, req *switchyardv1.ExplainRequest) (*switchyardv1.ExplainResponse, error) {
	pkt, err := packetOf(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	sn, ok := s.snapshot(req.GetNodeName())
	if !ok || sn.View == nil {
		return nil, status.Errorf(codes.NotFound, "node %q has no view", req.GetNodeName())
	}
	nv, applied := sn.View, false
	if sn.Acked != nil && !req.GetDesired() {
		nv, applied = sn.Acked, true
	} else if sn.Acked != nil {
		applied = sn.Acked.Version() == sn.View.Version()
	}
	st, err := stateOf(nv)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "node %q: %v", req.GetNodeName(), err)
	}
	mode := modeOf(req.GetMode(), sn.Status.Agent, st.Config)
	v := explain.Explain(st, modeNames[mode], pkt)
	resp := &switchyardv1.ExplainResponse{
		Action: actions[v.Action], Masquerade: v.Masquerade, SessionAffinityTimeoutSeconds: v.AffinitySeconds,
		Service: v.Service, PortName: v.Port, Address: v.Address, Reason: string(v.Why), Notes: v.Notes,
		Summary: v.String(), Version: nv.Version(), Mode: mode, Applied: applied,
	}
	for _, e := range v.Endpoints {
		resp.Endpoints = append(resp.Endpoints, &switchyardv1.EndpointShare{
			Address: e.Endpoint.Addr().String(), Port: uint32(e.Endpoint.Port()), Share: e.Share})
	}
	if !applied {
		resp.Notes = append(resp.Notes, "this is the desired view: the node has not acknowledged it yet")
	}
	return resp, nil
}

// packetOf reads the request's packet; tcp when no protocol is given.
func packetOf(req *switchyardv1.ExplainRequest) (explain.Packet, error) {
	if req.GetNodeName() == "" {
		return explain.Packet{}, fmt.Errorf("node_name is required")
	}
	src, err := netip.ParseAddr(req.GetSourceIp())
	if err != nil {
		return explain.Packet{}, fmt.Errorf("source_ip: %w", err)
	}
	dst, err := netip.ParseAddr(req.GetDestinationIp())
	if err != nil {
		return explain.Packet{}, fmt.Errorf("destination_ip: %w", err)
	}
	if req.GetDestinationPort() > 65535 {
		return explain.Packet{}, fmt.Errorf("destination_port %d: above 65535", req.GetDestinationPort())
	}
	proto := dataplane.TCP
	if p := req.GetProtocol(); p != "" {
		if proto, err = dataplane.ParseProtocol(p); err != nil {
			return explain.Packet{}, err
		}
	}
	if req.GetSourcePort() > 65535 {
		return explain.Packet{}, fmt.Errorf("source_port %d: above 65535", req.GetSourcePort())
	}
	pkt := explain.Packet{Protocol: proto, Src: src.Unmap(), Dst: dst.Unmap(), Port: uint16(req.GetDestinationPort()),
		SrcPort: uint16(req.GetSourcePort())}
	return pkt, pkt.Validate()
}

func (s *Server) snapshot(node string) (cache.NodeSnapshot, bool) {
	for _, sn := range s.src.Snapshot() {
		if sn.Status.Name == node {
			return sn, true
		}
	}
	return cache.NodeSnapshot{}, false
}

// stateOf decodes a node's view into what a dataplane would apply.
func stateOf(nv cache.NodeView) (*dataplane.State, error) {
	st := &dataplane.State{Services: make(map[string]*switchyardv1.ServiceView, nv.Len())}
	var err error
	nv.Range(func(v *cache.View) bool {
		var r *switchyardv1.Resource
		if r, err = cache.Decode(v); err != nil {
			return false
		}
		switch {
		case r.GetNodeConfig() != nil:
			st.Config = r.GetNodeConfig()
		case r.GetService() != nil:
			st.Services[r.GetName()] = r.GetService()
		}
		return true
	})
	return st, err
}

// modeOf is the mode to explain for: asked, else the agent's, else the
// NodeConfig's, else the agent's default.
func modeOf(asked switchyardv1.DataplaneMode, agent *switchyardv1.Node, cfg *switchyardv1.NodeConfig) switchyardv1.DataplaneMode {
	for _, m := range []switchyardv1.DataplaneMode{asked, agent.GetMode(), cfg.GetMode()} {
		if _, ok := modeNames[m]; ok {
			return m
		}
	}
	return switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES
}
