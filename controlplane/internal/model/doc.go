// Package model is the control plane's Kubernetes-free picture of the
// cluster: services, their endpoint slices, nodes and the Service IP
// ranges (ServiceCIDRs), already validated and normalised by package
// translate.
//
// Invariants every value here keeps, so consumers never re-check them:
//   - addresses are valid netip values of the family their slice declares;
//   - ports are 1..65535 and protocols known;
//   - a service's ports are unique by name and by (protocol, port);
//   - endpoint conditions are resolved (a nil "ready" is already true, a
//     nil "serving" already equals ready, as the API documents);
//   - values are immutable once built: updates replace them, so views and
//     caches may hold pointers without copying.
package model
