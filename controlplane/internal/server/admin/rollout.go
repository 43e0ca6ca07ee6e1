package admin

import (
	"context"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Rollout is the settings rollout this replica drives;
// *rollout.Driver implements it.
type Rollout interface {
	Status() *switchyardv1.GetRolloutResponse
	NodeSource(node string) string
}

var _ Rollout = (*rollout.Driver)(nil)

// WithRollout makes the server report r; without it GetRollout answers
// that no rollout runs and every node has the cluster's settings.
func (s *Server) WithRollout(r Rollout) *Server {
	s.rollout = r
	return s
}

// GetRollout returns the rollout as this replica drives it.
func (s *Server) GetRollout(context.Context, *switchyardv1.GetRolloutRequest) (*switchyardv1.GetRolloutResponse, error) {
	if s.rollout == nil {
		return &switchyardv1.GetRolloutResponse{State: "none", Summary: "no rollout"}, nil
	}
	return s.rollout.Status(), nil
}

// settingsOf fills in the settings this replica sends the node: the hash
// its desired NodeConfig, cfg, carries and where they come from.
func (s *Server) settingsOf(ns *switchyardv1.NodeStatus, cfg *switchyardv1.NodeConfig) *switchyardv1.NodeStatus {
	if cfg == nil {
		return ns
	}
	ns.DesiredSettingsHash = cfg.GetSettingsHash()
	ns.SettingsSource = "cluster"
	if s.rollout != nil {
		if src := s.rollout.NodeSource(ns.GetName()); src != "" {
			ns.SettingsSource = src
		}
	}
	return ns
}
