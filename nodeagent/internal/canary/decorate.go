package canary

import (
	"fmt"
	"net/netip"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// portName is the canary Service's one port.
const portName = "canary"

// endpointKey is what the canary's service is built from besides the
// flags.
type endpointKey struct {
	addr netip.Addr
	node string
}

// Decorate puts the canary's service into st, in place of any Service of
// the same name, or removes it when it cannot be programmed; it returns
// the one name it owns. It implements syncer.Decorator: st is the sync's
// own copy, changed the names that may differ from the previous call's
// state (nil: any may).
func (c *Canary) Decorate(st *dataplane.State, changed map[string]struct{}) []string {
	if st.Services == nil {
		st.Services = map[string]*switchyardv1.ServiceView{}
	}
	c.trackCollisions(st.Services, changed)
	t := c.place(st.Config)
	if t.addr.IsValid() {
		st.Services[Name] = c.service(endpointKey{addr: t.addr, node: st.Config.GetNodeName()})
	} else {
		delete(st.Services, Name)
	}
	switch prev := c.target(); {
	case t.reason != "" && t.reason != prev.reason:
		c.cfg.Logger.Warn("datapath canary not programmed; probes skipped", "reason", t.reason)
	case t.addr.IsValid() && t.addr != prev.addr:
		c.cfg.Logger.Info("datapath canary programmed", "service", Name, "clusterIP", c.cfg.VIP,
			"endpoint", netip.AddrPortFrom(t.addr, c.cfg.Port))
	}
	c.setTarget(t)
	return []string{Name}
}

// place decides where the canary's endpoint goes under cfg, or why it
// cannot be programmed.
func (c *Canary) place(cfg *switchyardv1.NodeConfig) target {
	vip := c.cfg.VIP.Addr()
	if len(c.collisions) > 0 {
		names := make([]string, 0, len(c.collisions))
		for n := range c.collisions {
			names = append(names, n)
		}
		slices.Sort(names)
		return target{reason: fmt.Sprintf("the canary's cluster IP %s is also the cluster IP of %s: reserve it with a Service named %s",
			vip, names[0], Name)}
	}
	if !inRanges(vip, cfg.GetServiceCidrs()) {
		return target{reason: fmt.Sprintf("the canary's cluster IP %s is outside the cluster's Service ranges %v", vip, cfg.GetServiceCidrs())}
	}
	for _, s := range cfg.GetNodeIps() {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap().Is4() == vip.Is4() {
			return target{addr: a.Unmap()}
		}
	}
	family := "IPv4"
	if !vip.Is4() {
		family = "IPv6"
	}
	return target{reason: fmt.Sprintf("the NodeConfig names no %s node address for the canary's endpoint", family)}
}

// inRanges reports whether a is inside one of the Service ranges, or the
// control plane sent none (an API without ServiceCIDRs): then only the
// operator's choice says it is one.
func inRanges(a netip.Addr, cidrs []string) bool {
	if len(cidrs) == 0 {
		return true
	}
	for _, s := range cidrs {
		if p, err := netip.ParsePrefix(s); err == nil && p.Contains(a) {
			return true
		}
	}
	return false
}

// trackCollisions keeps the names of the Services other than the
// canary's that have its cluster IP: all of them rescanned when changed
// is nil, else only the changed ones.
func (c *Canary) trackCollisions(services map[string]*switchyardv1.ServiceView, changed map[string]struct{}) {
	if changed == nil {
		clear(c.collisions)
		for name, sv := range services {
			if c.collides(name, sv) {
				c.collisions[name] = struct{}{}
			}
		}
		return
	}
	for name := range changed {
		delete(c.collisions, name)
		if sv, ok := services[name]; ok && c.collides(name, sv) {
			c.collisions[name] = struct{}{}
		}
	}
}

// collides reports whether sv, the Service name, holds the canary's
// cluster IP: the API server gave it that address, so the operator did
// not reserve it for the canary.
func (c *Canary) collides(name string, sv *switchyardv1.ServiceView) bool {
	if name == Name {
		return false
	}
	for _, s := range sv.GetClusterIps() {
		if a, err := netip.ParseAddr(s); err == nil && a.Unmap() == c.cfg.VIP.Addr() {
			return true
		}
	}
	return false
}

// service returns the canary's service for k, the same message while k
// is, so that the dataplane's memo of rendered services keeps it.
func (c *Canary) service(k endpointKey) *switchyardv1.ServiceView {
	if c.svc != nil && c.svcFor == k {
		return c.svc
	}
	c.svc, c.svcFor = &switchyardv1.ServiceView{
		Namespace:             Namespace,
		Name:                  ServiceName,
		Type:                  switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:            []string{c.cfg.VIP.Addr().String()},
		Ports:                 []*switchyardv1.ServicePort{{Name: portName, Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: uint32(c.cfg.VIP.Port()), HasAnyEndpoints: proto.Bool(true)}},
		SessionAffinity:       switchyardv1.SessionAffinity_SESSION_AFFINITY_NONE,
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		ClusterEndpoints: []*switchyardv1.Endpoint{{
			Address: k.addr.String(), Ports: []*switchyardv1.EndpointPort{{Name: portName, Port: uint32(c.cfg.Port)}},
			Ready: true, Serving: true, NodeName: k.node,
		}},
		HasAnyEndpoints: true,
	}, k
	return c.svc
}
