// Package translate turns Kubernetes API objects (Services, EndpointSlices,
// Nodes, ServiceCIDRs) into the Kubernetes-free values of package model.
// It is the only control-plane package that imports k8s.io/api:
// everything downstream sees validated, normalised model values and never
// re-checks them.
//
// Semantics follow kube-proxy's (pkg/proxy: newBaseServiceInfo,
// EndpointSliceCache, ShouldSkipService), with these rules:
//
//   - A whole object is skipped, with a *SkipError (see IsSkip), when no
//     proxy could program it: a headless or ExternalName service, a service
//     owned by another proxy (label service.kubernetes.io/service-proxy-name),
//     a service with no usable cluster IP, a slice with no
//     kubernetes.io/service-name label, of a headless service or of address
//     type FQDN, or an object whose names are not valid DNS names.
//   - A bad part of an object (an address that does not parse or is of the
//     wrong family, a port with an unknown protocol or out of range, a
//     duplicate port or endpoint, a field its service type does not allow) is
//     dropped and the rest is kept.
//   - Lists longer than the model's limits are clamped to the limit.
//   - Addresses are parsed with net/netip, normalised (IPv4-mapped IPv6
//     becomes IPv4, IPv6 is in canonical form, legacy IPv4 with leading
//     zeros is read as decimal as kube-proxy does) and never carry a zone.
//   - A service keeps at most one cluster IP per family, primary first, and
//     drops external, load-balancer and source-range addresses of a family
//     it has no cluster IP for: kube-proxy programs each family separately
//     and skips a service in a family where it has no cluster IP.
//   - Load-balancer source ranges apply per family: a family with no range
//     is unrestricted, as in kube-proxy.
//
// Every skip and every drop is reported exactly once to the Recorder passed
// in (which may be nil) as a (Kind, Reason) pair; a clamp is reported once
// per object. Counts is a goroutine-safe Recorder whose snapshot the control
// plane exports as metrics. Translation never panics, whatever the input.
package translate
