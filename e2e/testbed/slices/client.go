package slices

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	discoveryclientv1 "k8s.io/client-go/kubernetes/typed/discovery/v1"
)

// FieldManager is the server-side-apply field manager of Apply.
const FieldManager = "switchyard-testbed"

// Client writes EndpointSlices through client-go.
type Client struct {
	cs  kubernetes.Interface
	now func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithClock makes the Client stamp slices with now() instead of time.Now().
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// New returns a Client that writes through cs.
func New(cs kubernetes.Interface, opts ...Option) *Client {
	c := &Client{cs: cs, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Create creates the slice; it fails if it exists.
func (c *Client) Create(ctx context.Context, s Slice) (*discoveryv1.EndpointSlice, error) {
	es, err := c.build(ctx, s)
	if err != nil {
		return nil, err
	}
	out, err := c.api(s.Namespace).Create(ctx, es, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create EndpointSlice %s/%s: %w", s.Namespace, s.Name(), err)
	}
	return out, nil
}

// Update replaces the existing slice with s; it fails if the slice does not
// exist.
func (c *Client) Update(ctx context.Context, s Slice) (*discoveryv1.EndpointSlice, error) {
	cur, err := c.api(s.Namespace).Get(ctx, s.Name(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("update EndpointSlice %s/%s: %w", s.Namespace, s.Name(), err)
	}
	es, err := c.build(ctx, s)
	if err != nil {
		return nil, err
	}
	es.ResourceVersion = cur.ResourceVersion
	out, err := c.api(s.Namespace).Update(ctx, es, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update EndpointSlice %s/%s: %w", s.Namespace, s.Name(), err)
	}
	return out, nil
}

// Apply creates or updates the slice with server-side apply, forcing
// ownership of every field it sets.
func (c *Client) Apply(ctx context.Context, s Slice) (*discoveryv1.EndpointSlice, error) {
	es, err := c.build(ctx, s)
	if err != nil {
		return nil, err
	}
	es.TypeMeta = metav1.TypeMeta{APIVersion: discoveryv1.SchemeGroupVersion.String(), Kind: "EndpointSlice"}
	body, err := json.Marshal(es)
	if err != nil {
		return nil, fmt.Errorf("apply EndpointSlice %s/%s: %w", s.Namespace, s.Name(), err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: &force}
	out, err := c.api(s.Namespace).Patch(ctx, s.Name(), types.ApplyPatchType, body, opts)
	if err != nil {
		return nil, fmt.Errorf("apply EndpointSlice %s/%s: %w", s.Namespace, s.Name(), err)
	}
	return out, nil
}

// Delete deletes the slice <service>-<suffix>.
func (c *Client) Delete(ctx context.Context, namespace, service, suffix string) error {
	name := Name(service, suffix)
	if err := c.api(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete EndpointSlice %s/%s: %w", namespace, name, err)
	}
	return nil
}

// build reads the owning Service for its UID and labels and builds s.
func (c *Client) build(ctx context.Context, s Slice) (*discoveryv1.EndpointSlice, error) {
	svc, err := c.cs.CoreV1().Services(s.Namespace).Get(ctx, s.Service, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("EndpointSlice %s/%s: get Service: %w", s.Namespace, s.Name(), err)
	}
	return Build(svc, s, c.now())
}

func (c *Client) api(namespace string) discoveryclientv1.EndpointSliceInterface {
	return c.cs.DiscoveryV1().EndpointSlices(namespace)
}
