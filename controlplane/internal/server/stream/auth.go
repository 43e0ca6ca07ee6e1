package stream

import (
	"context"
	"crypto/x509"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Authorizer decides whether a stream may subscribe as node. It returns nil
// to allow, or an error (a gRPC status error, normally PermissionDenied).
type Authorizer interface {
	Authorize(ctx context.Context, node string) error
}

// AllowAll allows every stream; for plaintext or tests.
type AllowAll struct{}

var _ Authorizer = AllowAll{}

// Authorize allows.
func (AllowAll) Authorize(context.Context, string) error { return nil }

// NodeCert allows a stream on a TLS connection only when the client's
// verified certificate names the node: a DNS SAN equal to the node name, or
// a subject common name "system:node:<node>" (the kubelet convention) or
// "<node>". Connections without TLS are allowed: plaintext is only served
// when an operator asked for it explicitly.
type NodeCert struct{}

var _ Authorizer = NodeCert{}

// Authorize checks the peer certificate of ctx's connection against node.
func (NodeCert) Authorize(ctx context.Context, node string) error {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return status.Errorf(codes.PermissionDenied, "node %q: no verified client certificate", node)
	}
	if leaf := chains[0][0]; !CertNamesNode(leaf, node) {
		return status.Errorf(codes.PermissionDenied,
			"node %q: client certificate (CN %q, DNS %q) does not name this node",
			node, leaf.Subject.CommonName, leaf.DNSNames)
	}
	return nil
}

// CertNamesNode reports whether cert identifies node (see NodeCert).
func CertNamesNode(cert *x509.Certificate, node string) bool {
	if node == "" {
		return false
	}
	cn := cert.Subject.CommonName
	return slices.Contains(cert.DNSNames, node) || cn == node || cn == "system:node:"+node
}
