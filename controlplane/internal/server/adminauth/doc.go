// Package adminauth decides who may call AdminService. Discovery streams
// are for nodes (a node's certificate subscribes as that node only);
// AdminService reads every node's view, so it is for operators only.
//
// Under TLS a call needs one of two operator credentials:
//
//   - a verified client certificate whose subject Organization holds the
//     admin group (--admin-group, default "switchyard:admins"): for
//     break-glass access and automation that already has the cluster's CA
//     at hand;
//   - a Kubernetes bearer token (grpcurl -H "authorization: Bearer …"):
//     the control plane asks the API server who it is (TokenReview) and
//     whether that user may "get" the call's gRPC method as a non-resource
//     URL (SubjectAccessReview), e.g. /switchyard.v1.AdminService/ListNodes,
//     so RBAC grants it per method or with /switchyard.v1.AdminService/*,
//     as kube-rbac-proxy and controller-runtime's secure metrics do.
//
// Tokens are the path for people: identities, groups, expiry and audit
// stay the cluster's, and no certificate needs issuing. The certificate
// group keeps admin reachable while the API server is down, when the
// views are most worth reading. A kubelet's certificate (CN
// system:node:<name>, O system:nodes) is neither, so a node cannot read
// another node's view. Review answers are cached briefly (allowed 30 s,
// denied 5 s) so a polling operator does not load the API server.
//
// Plaintext (--insecure) has no identities to check: AdminService is then
// open to whoever reaches the port, which the control plane logs at start.
package adminauth
