package adminauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

const listNodes = "/switchyard.v1.AdminService/ListNodes"

// caller is a context as gRPC gives a handler: the peer's verified
// certificate (when cn is set) and the incoming metadata.
func caller(cn string, orgs []string, md ...string) context.Context {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(md...))
	if cn == "" {
		return ctx
	}
	leaf := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
	return peer.NewContext(ctx, &peer.Peer{AuthInfo: credentials.TLSInfo{
		State: tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}},
	}})
}

// stubReviewer allows the token "ops" and knows the token "dev" as a user
// RBAC does not allow.
type stubReviewer struct{ err error }

func (s stubReviewer) Review(_ context.Context, token, _ string) (string, bool, error) {
	switch {
	case s.err != nil:
		return "", false, s.err
	case token == "ops":
		return "ops@example.com", true, nil
	case token == "dev":
		return "dev@example.com", false, nil
	}
	return "", false, nil
}

func TestAuthorize(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ctx  context.Context
		want codes.Code
	}{
		{"plaintext install is open", Config{Open: true}, caller("", nil), codes.OK},
		{"no credential", Config{Reviewer: stubReviewer{}}, caller("", nil), codes.PermissionDenied},
		{"kubelet certificate", Config{Reviewer: stubReviewer{}}, caller("system:node:node-a", []string{"system:nodes"}), codes.PermissionDenied},
		{"operator certificate", Config{}, caller("alice", []string{"ops", DefaultGroup}), codes.OK},
		{"operator certificate, own group", Config{Group: "sre"}, caller("alice", []string{"sre"}), codes.OK},
		{"default group when another is configured", Config{Group: "sre"}, caller("alice", []string{DefaultGroup}), codes.PermissionDenied},
		{"token RBAC allows", Config{Reviewer: stubReviewer{}}, caller("", nil, "authorization", "Bearer ops"), codes.OK},
		{"token with a node certificate", Config{Reviewer: stubReviewer{}}, caller("system:node:node-a", []string{"system:nodes"}, "authorization", "bearer ops"), codes.OK},
		{"token RBAC refuses", Config{Reviewer: stubReviewer{}}, caller("", nil, "authorization", "Bearer dev"), codes.PermissionDenied},
		{"token not valid", Config{Reviewer: stubReviewer{}}, caller("", nil, "authorization", "Bearer forged"), codes.PermissionDenied},
		{"token, API unreachable", Config{Reviewer: stubReviewer{err: errors.New("connection refused")}}, caller("", nil, "authorization", "Bearer ops"), codes.Unavailable},
		{"token without a reviewer", Config{}, caller("", nil, "authorization", "Bearer ops"), codes.PermissionDenied},
		{"basic auth is not a token", Config{Reviewer: stubReviewer{}}, caller("", nil, "authorization", "Basic b3Bz"), codes.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(tt.cfg).Authorize(tt.ctx, listNodes)
			if got := status.Code(err); got != tt.want {
				t.Errorf("Authorize = %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// TestUnaryOnlyAdmin: discovery, health and reflection are not the
// interceptor's business.
func TestUnaryOnlyAdmin(t *testing.T) {
	a := New(Config{})
	next := func(context.Context, any) (any, error) { return "served", nil }
	for method, want := range map[string]codes.Code{
		listNodes:                                codes.PermissionDenied,
		"/switchyard.v1.AdminService/GetService": codes.PermissionDenied,
		"/grpc.health.v1.Health/Check":           codes.OK,
		"/switchyard.v1.DiscoveryService/Fetch":  codes.OK,
	} {
		_, err := a.Unary()(caller("system:node:n", nil), nil, &grpc.UnaryServerInfo{FullMethod: method}, next)
		if got := status.Code(err); got != want {
			t.Errorf("%s: %v (%v), want %v", method, got, err, want)
		}
	}
}

// TestKubeReviewer: TokenReview then SubjectAccessReview of the method as
// a non-resource URL, cached per token and method until it expires.
func TestKubeReviewer(t *testing.T) {
	cs := fake.NewClientset()
	var reviews, sars int
	var lastSAR authzv1.SubjectAccessReviewSpec
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if tr.Spec.Token == "good" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{
				Username: "alice", Groups: []string{"sre"}, Extra: map[string]authnv1.ExtraValue{"scopes": {"x"}}}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sars++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		lastSAR = sar.Spec
		sar.Status.Allowed = sar.Spec.NonResourceAttributes.Path == listNodes
		return true, sar, nil
	})
	now := time.Unix(1000, 0)
	r := NewKubeReviewer(cs)
	r.now = func() time.Time { return now }
	ctx := context.Background()

	user, ok, err := r.Review(ctx, "good", listNodes)
	if err != nil || !ok || user != "alice" {
		t.Fatalf("Review(good, ListNodes) = %q, %v, %v; want alice allowed", user, ok, err)
	}
	if a := lastSAR.NonResourceAttributes; a == nil || a.Verb != "get" || lastSAR.User != "alice" || lastSAR.Groups[0] != "sre" || lastSAR.Extra["scopes"][0] != "x" {
		t.Errorf("SubjectAccessReview spec = %+v, want alice's identity and get on the method", lastSAR)
	}
	if _, ok, _ := r.Review(ctx, "good", "/switchyard.v1.AdminService/GetNodeView"); ok {
		t.Error("GetNodeView allowed; RBAC allows only ListNodes")
	}
	if user, ok, _ := r.Review(ctx, "bad", listNodes); ok || user != "" {
		t.Errorf("Review(bad) = %q, %v; want unauthenticated", user, ok)
	}
	if reviews != 3 || sars != 2 {
		t.Fatalf("reviews=%d sars=%d, want 3 and 2 (no SAR for an unauthenticated token)", reviews, sars)
	}
	r.Review(ctx, "good", listNodes)
	r.Review(ctx, "bad", listNodes)
	if reviews != 3 {
		t.Errorf("cached answers asked the API again: %d reviews", reviews)
	}
	now = now.Add(deniedTTL)
	r.Review(ctx, "bad", listNodes)
	r.Review(ctx, "good", listNodes)
	if reviews != 4 {
		t.Errorf("after %v: %d reviews, want 4 (only the refusal expired)", deniedTTL, reviews)
	}
	now = now.Add(allowedTTL)
	r.Review(ctx, "good", listNodes)
	if reviews != 5 {
		t.Errorf("after %v: %d reviews, want 5 (the grant expired too)", allowedTTL, reviews)
	}
}
