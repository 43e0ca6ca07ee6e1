package adminauth

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultGroup is the certificate Organization that makes an operator.
const DefaultGroup = "switchyard:admins"

// servicePrefix is the full-method prefix of every AdminService call.
const servicePrefix = "/switchyard.v1.AdminService/"

// Reviewer answers whether the bearer token's user may call method.
type Reviewer interface {
	// Review returns the token's user name and whether it may call
	// method; an error when the question could not be asked.
	Review(ctx context.Context, token, method string) (user string, allowed bool, err error)
}

// Config configures an Authorizer.
type Config struct {
	// Open allows every call: plaintext, where there is no identity.
	Open bool
	// Group is the certificate Organization of operators; DefaultGroup
	// when empty.
	Group string
	// Reviewer checks bearer tokens; nil refuses them.
	Reviewer Reviewer
}

// Authorizer checks AdminService calls.
type Authorizer struct{ cfg Config }

// New returns an Authorizer.
func New(cfg Config) *Authorizer {
	if cfg.Group == "" {
		cfg.Group = DefaultGroup
	}
	return &Authorizer{cfg: cfg}
}

// Unary is the interceptor: AdminService calls are checked, every other
// service (discovery, health, reflection) passes.
func (a *Authorizer) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if strings.HasPrefix(info.FullMethod, servicePrefix) {
			if err := a.Authorize(ctx, info.FullMethod); err != nil {
				return nil, err
			}
		}
		return next(ctx, req)
	}
}

// Authorize returns nil when ctx's caller may call method, else a
// PermissionDenied (or Unavailable, when the API could not be asked)
// status saying what credential is needed.
func (a *Authorizer) Authorize(ctx context.Context, method string) error {
	if a.cfg.Open {
		return nil
	}
	leaf := verifiedLeaf(ctx)
	if leaf != nil && slices.Contains(leaf.Subject.Organization, a.cfg.Group) {
		return nil
	}
	if token := bearer(ctx); token != "" {
		if a.cfg.Reviewer == nil {
			return status.Error(codes.PermissionDenied, "bearer tokens are not accepted: this control plane has no Kubernetes API to review them")
		}
		user, ok, err := a.cfg.Reviewer.Review(ctx, token, method)
		switch {
		case err != nil:
			return status.Errorf(codes.Unavailable, "review the bearer token: %v", err)
		case !ok && user == "":
			return status.Error(codes.PermissionDenied, "the bearer token is not valid (TokenReview: not authenticated)")
		case !ok:
			return status.Errorf(codes.PermissionDenied, "user %q may not get the non-resource URL %s (SubjectAccessReview)", user, method)
		}
		return nil
	}
	who := "no client certificate"
	if leaf != nil {
		who = fmt.Sprintf("client certificate CN %q, O %q", leaf.Subject.CommonName, leaf.Subject.Organization)
	}
	return status.Errorf(codes.PermissionDenied,
		"AdminService is for operators (%s): present a client certificate with O=%q, or a Kubernetes bearer token whose user may get the non-resource URL %s",
		who, a.cfg.Group, method)
}

// verifiedLeaf is the caller's verified client certificate, or nil.
func verifiedLeaf(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return info.State.VerifiedChains[0][0]
}

// bearer is the token of the "authorization: Bearer …" metadata, or "".
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, tok, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}
