package slices

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestClientCreateUpdateDelete(t *testing.T) {
	ctx := t.Context()
	cs := fake.NewClientset(service())
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	c := New(cs, WithClock(func() time.Time { return now }))
	s := Slice{Namespace: "ns", Service: "web", Suffix: "a", Ports: []Port{TCP("http", 80)}, Endpoints: []Endpoint{Ready("10.0.0.1")}}

	created, err := c.Create(ctx, s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	want, err := Build(service(), s, now)
	if err != nil {
		t.Fatal(err)
	}
	// The server (here the fake) adds type and managed-field bookkeeping.
	ignore := cmp.Options{cmpopts.IgnoreTypes(metav1.TypeMeta{}), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields")}
	if diff := cmp.Diff(want, created, ignore); diff != "" {
		t.Errorf("Create wrote (-want +got):\n%s", diff)
	}
	if _, err := c.Create(ctx, s); !apierrors.IsAlreadyExists(err) {
		t.Errorf("second Create = %v, want AlreadyExists", err)
	}

	now = now.Add(time.Second)
	s.Endpoints = append(s.Endpoints, Terminating(true, "10.0.0.2"))
	updated, err := c.Update(ctx, s)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got, want := len(updated.Endpoints), 2; got != want {
		t.Errorf("updated slice has %d endpoints, want %d", got, want)
	}
	if got, want := updated.Annotations[corev1.EndpointsLastChangeTriggerTime], "2026-01-02T03:04:06.000000006Z"; got != want {
		t.Errorf("trigger time after Update = %q, want %q", got, want)
	}

	if err := c.Delete(ctx, "ns", "web", "a"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("ns").Get(ctx, "web-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get after Delete = %v, want NotFound", err)
	}
	if _, err := c.Update(ctx, s); !apierrors.IsNotFound(err) {
		t.Errorf("Update of a deleted slice = %v, want NotFound", err)
	}
}

func TestClientNeedsService(t *testing.T) {
	c := New(fake.NewClientset())
	_, err := c.Create(t.Context(), Slice{Namespace: "ns", Service: "web", Suffix: "a"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Create without a Service = %v, want NotFound", err)
	}
}
