package adminauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Cache lifetimes: a grant is trusted a little longer than a refusal, so a
// binding just created is seen quickly.
const (
	allowedTTL = 30 * time.Second
	deniedTTL  = 5 * time.Second
	// maxCached bounds the cache: a client spraying tokens costs at most
	// this many entries.
	maxCached = 1024
)

// KubeReviewer reviews tokens against the API server: TokenReview, then a
// SubjectAccessReview of verb get on the method as a non-resource URL. The
// control plane needs create on tokenreviews and subjectaccessreviews
// (ClusterRole system:auth-delegator).
type KubeReviewer struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]verdict
}

type verdict struct {
	user    string
	allowed bool
	expires time.Time
}

// NewKubeReviewer reviews with client.
func NewKubeReviewer(client kubernetes.Interface) *KubeReviewer {
	return &KubeReviewer{client: client, now: time.Now, cache: map[[sha256.Size]byte]verdict{}}
}

var _ Reviewer = (*KubeReviewer)(nil)

// Review implements Reviewer.
func (r *KubeReviewer) Review(ctx context.Context, token, method string) (string, bool, error) {
	key := sha256.Sum256([]byte(method + "\x00" + token))
	if v, ok := r.cached(key); ok {
		return v.user, v.allowed, nil
	}
	v, err := r.review(ctx, token, method)
	if err != nil {
		return "", false, err
	}
	r.store(key, v)
	return v.user, v.allowed, nil
}

func (r *KubeReviewer) review(ctx context.Context, token, method string) (verdict, error) {
	tr, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return verdict{expires: r.now().Add(deniedTTL)}, nil
	}
	u := tr.Status.User
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, Groups: u.Groups, UID: u.UID, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: method, Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return verdict{}, fmt.Errorf("SubjectAccessReview for %q: %w", u.Username, err)
	}
	ttl := deniedTTL
	if sar.Status.Allowed {
		ttl = allowedTTL
	}
	return verdict{user: u.Username, allowed: sar.Status.Allowed, expires: r.now().Add(ttl)}, nil
}

func (r *KubeReviewer) cached(key [sha256.Size]byte) (verdict, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.cache[key]
	if !ok || !r.now().Before(v.expires) {
		return verdict{}, false
	}
	return v, true
}

func (r *KubeReviewer) store(key [sha256.Size]byte, v verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cache) >= maxCached {
		now := r.now()
		for k, old := range r.cache {
			if !now.Before(old.expires) {
				delete(r.cache, k)
			}
		}
		if len(r.cache) >= maxCached {
			clear(r.cache) // all live: start over rather than grow
		}
	}
	r.cache[key] = v
}
