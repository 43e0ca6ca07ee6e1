package translate

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// LabelServiceProxyName marks a service as owned by another proxy: kube-proxy,
// and so Switchyard, ignore services that carry it, whatever its value.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// Service translates one Service. It returns a *SkipError when the service
// is not one a proxy programs (headless, ExternalName, another proxy's,
// without a usable cluster IP or with invalid names); otherwise bad parts
// are dropped and reported to rec, which may be nil.
func Service(svc *corev1.Service, rec Recorder) (*model.Service, error) {
	t, err := objectTally(rec, KindService, svc)
	if err != nil {
		return nil, err
	}
	typ, err := serviceType(svc, t)
	if err != nil {
		return nil, err
	}
	clusterIPs, fams, err := clusterIPs(svc, t)
	if err != nil {
		return nil, err
	}
	out := &model.Service{
		Key:                      model.ServiceKey{Namespace: svc.Namespace, Name: svc.Name},
		Type:                     typ,
		ClusterIPs:               clusterIPs,
		ExternalIPs:              externalIPs(svc, fams, t),
		LoadBalancerIPs:          loadBalancerIPs(svc, typ, fams, t),
		LoadBalancerSourceRanges: sourceRanges(svc, typ, fams, t),
		Ports:                    servicePorts(svc, typ, t),
		AffinityTimeoutSeconds:   affinityTimeout(svc, t),
		InternalPolicy:           internalPolicy(svc, t),
		TrafficDistribution:      trafficDistribution(svc, t),
		LoadBalancing:            loadBalancing(svc, t),
	}
	accessible := typ != model.TypeClusterIP || len(out.ExternalIPs) > 0
	out.ExternalPolicy = externalPolicy(svc, accessible, t)
	out.HealthCheckNodePort = healthCheckNodePort(svc, typ, out.ExternalPolicy, t)
	return out, nil
}

// serviceType checks everything that makes a service unproxyable except its
// cluster IPs, and returns its type.
func serviceType(svc *corev1.Service, t tally) (model.ServiceType, error) {
	// Names are checked as the agents check them (serviceport's one
	// definition), so no view the control plane sends is refused there.
	if err := serviceport.CheckNamespace(svc.Namespace); err != nil {
		return 0, t.skip(ReasonInvalidName, "namespace: %v", err)
	}
	if err := serviceport.CheckServiceName(svc.Name); err != nil {
		return 0, t.skip(ReasonInvalidName, "name: %v", err)
	}
	if owner, ok := svc.Labels[LabelServiceProxyName]; ok {
		return 0, t.skip(ReasonOtherProxy, "label %s=%q", LabelServiceProxyName, owner)
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, "":
		return model.TypeClusterIP, nil
	case corev1.ServiceTypeNodePort:
		return model.TypeNodePort, nil
	case corev1.ServiceTypeLoadBalancer:
		return model.TypeLoadBalancer, nil
	case corev1.ServiceTypeExternalName:
		return 0, t.skip(ReasonExternalName, "type ExternalName is served by DNS")
	}
	return 0, t.skip(ReasonUnsupportedType, "type %q", svc.Spec.Type)
}

// clusterIPs returns the usable cluster IPs, primary first, at most one per
// family, and the set of families they cover.
func clusterIPs(svc *corev1.Service, t tally) ([]netip.Addr, families, error) {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 {
		raw = []string{svc.Spec.ClusterIP}
	}
	primary := svc.Spec.ClusterIP
	if primary == "" {
		primary = raw[0]
	}
	if primary == "" || primary == corev1.ClusterIPNone {
		return nil, 0, t.skip(ReasonHeadless, "clusterIP %q", primary)
	}
	var (
		out  []netip.Addr
		fams families
	)
	for _, s := range raw {
		addr, ok := parseAddr(s)
		if !ok {
			t.drop(ReasonInvalidIP)
			continue
		}
		fam := familyOf(addr)
		if fams.has(fam) {
			t.drop(ReasonExtraClusterIP)
			continue
		}
		fams.add(fam)
		out = append(out, addr)
	}
	if len(out) == 0 {
		return nil, 0, t.skip(ReasonNoClusterIP, "no valid cluster IP in %q", raw)
	}
	return out, fams, nil
}

// addrSet collects addresses once each, in first-seen order, keeping only
// families the service serves.
type addrSet struct {
	t    tally
	fams families
	seen map[netip.Addr]struct{}
	out  []netip.Addr
}

func (s *addrSet) add(raw string) {
	addr, ok := parseAddr(raw)
	switch {
	case !ok:
		s.t.drop(ReasonInvalidIP)
	case !s.fams.has(familyOf(addr)):
		s.t.drop(ReasonFamilyNotServed)
	default:
		if _, dup := s.seen[addr]; dup {
			s.t.drop(ReasonDuplicateAddress)
			return
		}
		if s.seen == nil {
			s.seen = map[netip.Addr]struct{}{}
		}
		s.seen[addr] = struct{}{}
		s.out = append(s.out, addr)
	}
}

func externalIPs(svc *corev1.Service, fams families, t tally) []netip.Addr {
	set := addrSet{t: t, fams: fams}
	for _, raw := range svc.Spec.ExternalIPs {
		set.add(raw)
	}
	return set.out
}

// loadBalancerIPs returns the VIP-mode ingress IPs. Ingress points with
// ipMode Proxy are skipped, as kube-proxy does: the load balancer delivers
// their traffic to the node, not to the VIP.
func loadBalancerIPs(svc *corev1.Service, typ model.ServiceType, fams families, t tally) []netip.Addr {
	set := addrSet{t: t, fams: fams}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		switch {
		case ing.IP == "":
			// Hostname-only ingress: nothing for a proxy to program.
		case typ != model.TypeLoadBalancer:
			t.drop(ReasonFieldNotApplicable)
		case ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP:
			t.drop(ReasonProxyModeIngress)
		default:
			set.add(ing.IP)
		}
	}
	return set.out
}

// sourceRanges returns spec.loadBalancerSourceRanges, trimmed (the API lets
// whitespace through), masked and deduplicated.
func sourceRanges(svc *corev1.Service, typ model.ServiceType, fams families, t tally) []netip.Prefix {
	var (
		out  []netip.Prefix
		seen map[netip.Prefix]struct{}
	)
	for _, raw := range svc.Spec.LoadBalancerSourceRanges {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		if typ != model.TypeLoadBalancer {
			t.drop(ReasonFieldNotApplicable)
			continue
		}
		prefix, ok := parsePrefix(raw)
		if !ok {
			t.drop(ReasonInvalidSourceRange)
			continue
		}
		if !fams.has(familyOf(prefix.Addr())) {
			t.drop(ReasonFamilyNotServed)
			continue
		}
		if _, dup := seen[prefix]; dup {
			t.drop(ReasonDuplicateAddress)
			continue
		}
		if seen == nil {
			seen = map[netip.Prefix]struct{}{}
		}
		seen[prefix] = struct{}{}
		out = append(out, prefix)
	}
	return out
}
