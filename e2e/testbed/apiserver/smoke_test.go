package apiserver_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

const (
	smokeNS  = "smoke"
	smokeSvc = "web"
)

func TestAPIServerSmoke(t *testing.T) {
	s := apiserver.Start(t)
	ctx := t.Context()
	cs := s.Client()

	t.Run("version", func(t *testing.T) {
		pinned, err := apiserver.PinnedVersions()
		if err != nil {
			t.Fatal(err)
		}
		info, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if info.GitVersion != pinned.Kubernetes {
			t.Errorf("/version gitVersion = %q, want pinned %q", info.GitVersion, pinned.Kubernetes)
		}
	})

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: smokeNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := createService(t, cs)

	t.Run("cluster IP in service range", func(t *testing.T) {
		cidr := netip.MustParsePrefix(apiserver.DefaultServiceCIDR)
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !cidr.Contains(ip) {
			t.Errorf("clusterIP %q not in %s (parse error %v)", svc.Spec.ClusterIP, cidr, err)
		}
	})

	t.Run("watch sees slice writes in order", func(t *testing.T) {
		testSliceEvents(t, cs, svc)
	})
	t.Run("server-side apply", func(t *testing.T) {
		testApply(t, cs)
	})
	t.Run("RBAC restricts non-admin clients", func(t *testing.T) {
		testRBAC(t, s, cs)
	})

	if t.Failed() {
		return // keep the logs for the cleanup's dump
	}
	t.Run("teardown", func(t *testing.T) {
		etcdPID, apiPID := s.PIDs()
		dir := s.Dir()
		if err := s.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		for _, pid := range []int{etcdPID, apiPID} {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Stop (kill 0: %v)", pid, err)
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("/proc/%d still there after Stop (stat: %v)", pid, err)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("state dir %s still there after Stop (stat: %v)", dir, err)
		}
		if err := s.Stop(); err != nil {
			t.Errorf("second Stop: %v", err)
		}
	})
}

func createService(t *testing.T, cs kubernetes.Interface) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: smokeSvc, Namespace: smokeNS, Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	svc, err := cs.CoreV1().Services(smokeNS).Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// event is what the smoke test compares of a watch event.
type event struct {
	Type watch.EventType
	Name string
}

// recorder collects watch events in the background.
type recorder struct {
	mu     sync.Mutex
	events []event
	done   chan struct{}
}

func record(w watch.Interface) *recorder {
	r := &recorder{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range w.ResultChan() {
			name := ""
			if es, ok := ev.Object.(*discoveryv1.EndpointSlice); ok {
				name = es.Name
			}
			r.mu.Lock()
			r.events = append(r.events, event{Type: ev.Type, Name: name})
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

func testSliceEvents(t *testing.T, cs kubernetes.Interface, svc *corev1.Service) {
	ctx := t.Context()
	api := cs.DiscoveryV1().EndpointSlices(smokeNS)
	selector := discoveryv1.LabelServiceName + "=" + smokeSvc
	list, err := api.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := api.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(w)
	t.Cleanup(func() { w.Stop(); <-rec.done })

	sc := slices.New(cs)
	ports := []slices.Port{slices.TCP("http", 8080)}
	a := slices.Slice{Namespace: smokeNS, Service: smokeSvc, Suffix: "a", Ports: ports,
		Endpoints: []slices.Endpoint{slices.Ready("10.244.0.10").OnNode("node-1").InZone("zone-a")}}
	b := slices.Slice{Namespace: smokeNS, Service: smokeSvc, Suffix: "b", Ports: ports,
		Endpoints: []slices.Endpoint{slices.Ready("10.244.1.10").OnNode("node-2").InZone("zone-b")}}

	before := time.Now()
	if _, err := sc.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	a.Endpoints = append(a.Endpoints, slices.Terminating(true, "10.244.0.11").OnNode("node-1"))
	updated, err := sc.Update(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Delete(ctx, smokeNS, smokeSvc, "b"); err != nil {
		t.Fatal(err)
	}

	want := []event{
		{watch.Added, "web-a"},
		{watch.Added, "web-b"},
		{watch.Modified, "web-a"},
		{watch.Deleted, "web-b"},
	}
	poll(t, 10*time.Second, func() bool { return len(rec.snapshot()) >= len(want) })
	if diff := cmp.Diff(want, rec.snapshot()); diff != "" {
		t.Errorf("watch events (-want +got):\n%s", diff)
	}

	// What the server stored is what the controller would have written.
	if got := updated.OwnerReferences; len(got) != 1 || got[0].UID != svc.UID || got[0].Controller == nil || !*got[0].Controller {
		t.Errorf("owner references = %+v, want one controller reference to Service UID %s", got, svc.UID)
	}
	wantLabels := map[string]string{
		"app":                                    "web",
		"kubernetes.io/service-name":             smokeSvc,
		"endpointslice.kubernetes.io/managed-by": slices.ManagedBy,
	}
	if diff := cmp.Diff(wantLabels, updated.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	stamp, err := time.Parse(time.RFC3339Nano, updated.Annotations[corev1.EndpointsLastChangeTriggerTime])
	if err != nil || stamp.Before(before.Add(-time.Second)) {
		t.Errorf("trigger time %q: parse error %v, or before the writes (%v)", updated.Annotations[corev1.EndpointsLastChangeTriggerTime], err, before)
	}
	if got := len(updated.Endpoints); got != 2 {
		t.Errorf("updated slice has %d endpoints, want 2", got)
	}
}

func testApply(t *testing.T, cs kubernetes.Interface) {
	ctx := t.Context()
	sc := slices.New(cs)
	c := slices.Slice{Namespace: smokeNS, Service: smokeSvc, Suffix: "c", AddressType: discoveryv1.AddressTypeIPv6,
		Ports: []slices.Port{slices.TCP("http", 8080)}, Endpoints: []slices.Endpoint{slices.Ready("fd00::10")}}
	first, err := sc.Apply(ctx, c)
	if err != nil {
		t.Fatalf("Apply (create): %v", err)
	}
	c.Endpoints = []slices.Endpoint{slices.NotReady("fd00::10"), slices.Ready("fd00::11").WithZoneHints("zone-a")}
	second, err := sc.Apply(ctx, c)
	if err != nil {
		t.Fatalf("Apply (update): %v", err)
	}
	if first.UID != second.UID || first.ResourceVersion == second.ResourceVersion {
		t.Errorf("Apply did not update in place: uid %s -> %s, rv %s -> %s", first.UID, second.UID, first.ResourceVersion, second.ResourceVersion)
	}
	if got := len(second.Endpoints); got != 2 || second.Endpoints[1].Hints == nil {
		t.Errorf("applied slice endpoints = %+v, want 2 with hints on the second", second.Endpoints)
	}
	managers := map[string]metav1.ManagedFieldsOperationType{}
	for _, mf := range second.ManagedFields {
		managers[mf.Manager] = mf.Operation
	}
	if diff := cmp.Diff(map[string]metav1.ManagedFieldsOperationType{slices.FieldManager: metav1.ManagedFieldsOperationApply}, managers); diff != "" {
		t.Errorf("managed fields (-want +got):\n%s", diff)
	}
}

func testRBAC(t *testing.T, s *apiserver.Server, admin kubernetes.Interface) {
	ctx := t.Context()
	saCfg, err := s.ServiceAccountConfig(ctx, smokeNS, "reader")
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]kubernetes.Interface{
		"service account": kubernetes.NewForConfigOrDie(saCfg),
		"impersonated":    kubernetes.NewForConfigOrDie(s.ImpersonatingConfig("alice", "devs")),
	}
	list := func(cs kubernetes.Interface) error {
		_, err := cs.DiscoveryV1().EndpointSlices(smokeNS).List(ctx, metav1.ListOptions{})
		return err
	}
	for name, cs := range clients {
		if err := list(cs); !apierrors.IsForbidden(err) {
			t.Errorf("%s: list before any binding = %v, want Forbidden", name, err)
		}
	}

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "slice-reader", Namespace: smokeNS},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"},
			Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "slice-reader", Namespace: smokeNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: smokeNS},
			{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "devs"},
		},
	}
	if _, err := admin.RbacV1().Roles(smokeNS).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(smokeNS).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer reads through informers: poll until it has caught up.
	for name, cs := range clients {
		poll(t, 10*time.Second, func() bool { return list(cs) == nil })
		_, err := cs.CoreV1().Services(smokeNS).List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: list services = %v, want Forbidden (role grants only endpointslices)", name, err)
		}
	}
}

// poll waits until cond holds, checking every 20ms for at most timeout.
func poll(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("condition not met within %v: %v", timeout, err)
	}
}
