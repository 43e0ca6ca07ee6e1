// Package slices writes discovery.k8s.io/v1 EndpointSlices the way the
// upstream EndpointSlice controller does, for a test bed that runs
// kube-apiserver without kube-controller-manager.
//
// The package has a pure half and an I/O half:
//   - Build turns a Service and a friendly Slice description into the exact
//     EndpointSlice object the controller would write. It does no I/O and
//     reads no clock, so it is unit-tested without a server.
//   - Client fetches the owning Service (its UID goes into the owner
//     reference), calls Build with the current time, and creates, updates,
//     server-side applies or deletes the object through client-go.
//
// Invariants of every slice written:
//   - labels kubernetes.io/service-name=<service> and
//     endpointslice.kubernetes.io/managed-by=switchyard-testbed, plus the
//     Service's own labels and service.kubernetes.io/headless for headless
//     Services, as upstream copies them;
//   - a controller owner reference to the Service;
//   - name <service>-<suffix>;
//   - annotation endpoints.kubernetes.io/last-change-trigger-time holding the
//     write time in UTC, formatted time.RFC3339Nano, as upstream does.
//
// The package name shadows the standard library's slices; import it under
// another name where both are needed.
package slices
