package watch

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/apistatus"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/rollout"
	"github.com/switchyard-proxy/switchyard/dataplane/serviceport"
)

// Label selectors as kube-proxy uses them: services owned by another proxy
// and headless services' slices are never sent to us.
const (
	serviceSelector = "!service.kubernetes.io/service-proxy-name"
	sliceSelector   = discoveryv1.LabelServiceName + ",!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"
)

// triggerTimeAnnotation is the only annotation the control plane reads.
const triggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// informerSet is the informers the control plane needs.
type informerSet struct {
	all      []cache.SharedIndexInformer
	services cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	nodes    cache.SharedIndexInformer
	// serviceCIDRs is nil when the API serves no ServiceCIDRs.
	serviceCIDRs cache.SharedIndexInformer
	// configMap is nil when no settings ConfigMap is read.
	configMap cache.SharedIndexInformer
	wg        sync.WaitGroup
}

// newInformers makes the informers, each list and watch reporting to api
// (which also keeps an outage from becoming client-go's long backoff);
// the ServiceCIDR one only with serviceCIDRs (the API serves them), the
// ConfigMap one only for a settings ConfigMap (cm.name set): it lists and
// watches that one object (a field selector on its name), which is what
// an RBAC rule with resourceNames allows.
// Informers are built here rather than by a SharedInformerFactory because
// the factory offers no seam around its ListerWatchers.
func newInformers(client kubernetes.Interface, resync time.Duration, serviceCIDRs bool, api *apistatus.Tracker, cm configMapRef) (*informerSet, error) {
	core, disc, netw := client.CoreV1(), client.DiscoveryV1(), client.NetworkingV1()
	s := &informerSet{}
	var err error
	mk := func(resource string, example runtime.Object, lw *cache.ListWatch) cache.SharedIndexInformer {
		inf := cache.NewSharedIndexInformerWithOptions(api.Wrap(resource, cache.ToListWatcherWithWatchListSemantics(lw, client)),
			example, cache.SharedIndexInformerOptions{ResyncPeriod: resync, ObjectDescription: resource})
		if terr := inf.SetTransform(stripObject); terr != nil && err == nil {
			err = fmt.Errorf("watch: %s informer transform: %w", resource, terr)
		}
		s.all = append(s.all, inf)
		return inf
	}
	svcs, slices := core.Services(metav1.NamespaceAll), disc.EndpointSlices(metav1.NamespaceAll)
	s.services = mk("services", &corev1.Service{}, selected(serviceSelector, svcs.List, svcs.Watch))
	s.slices = mk("endpointslices", &discoveryv1.EndpointSlice{}, selected(sliceSelector, slices.List, slices.Watch))
	s.nodes = mk("nodes", &corev1.Node{}, selected("", core.Nodes().List, core.Nodes().Watch))
	if serviceCIDRs {
		s.serviceCIDRs = mk("servicecidrs", &networkingv1.ServiceCIDR{},
			selected("", netw.ServiceCIDRs().List, netw.ServiceCIDRs().Watch))
	}
	if cm.name != "" {
		cms := core.ConfigMaps(cm.namespace)
		lw := selected("", cms.List, cms.Watch)
		byName := fields.OneTermEqualSelector(metav1.ObjectNameField, cm.name).String()
		list, watchFn := lw.ListWithContextFunc, lw.WatchFuncWithContext
		lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return list(ctx, o)
		}
		lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return watchFn(ctx, o)
		}
		s.configMap = mk("configmaps", &corev1.ConfigMap{}, lw)
	}
	return s, err
}

// selected is the ListWatch of a typed client's list and watch, with the
// label selector sel unless it is empty.
func selected[L runtime.Object](sel string, list func(context.Context, metav1.ListOptions) (L, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	with := func(o metav1.ListOptions) metav1.ListOptions {
		if sel != "" {
			o.LabelSelector = sel
		}
		return o
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return list(ctx, with(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return watchFn(ctx, with(o))
		},
	}
}

// start runs every informer until ctx ends; wait waits for them to stop.
func (s *informerSet) start(ctx context.Context) {
	for _, inf := range s.all {
		s.wg.Go(func() { inf.RunWithContext(ctx) })
	}
}

func (s *informerSet) wait() { s.wg.Wait() }

func (s *informerSet) synced() []cache.InformerSynced {
	out := []cache.InformerSynced{s.services.HasSynced, s.slices.HasSynced, s.nodes.HasSynced}
	if s.serviceCIDRs != nil {
		out = append(out, s.serviceCIDRs.HasSynced)
	}
	// The settings ConfigMap too: the first views must carry its settings,
	// or every node would get the flags' and then switch.
	if s.configMap != nil {
		out = append(out, s.configMap.HasSynced)
	}
	return out
}

// configMapStore is the settings ConfigMap informer's store, nil without one.
func (s *informerSet) configMapStore() cache.Store {
	if s.configMap == nil {
		return nil
	}
	return s.configMap.GetStore()
}

// serviceCIDRStore is the ServiceCIDR informer's store, nil without one.
func (s *informerSet) serviceCIDRStore() cache.Store {
	if s.serviceCIDRs == nil {
		return nil
	}
	return s.serviceCIDRs.GetStore()
}

// stripObject drops what the control plane never reads before the object is
// cached: managedFields (often most of an object's bytes), annotations
// other than the ones it reads (a slice's trigger time, a Service's
// load-balancing algorithm), the parts of Node that dominate its size
// (images, conditions, volumes) and a ServiceCIDR's status. Informers
// keep tombstones as they are.
func stripObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		stripMeta(&o.ObjectMeta, serviceport.AnnotationLoadBalancing)
	case *discoveryv1.EndpointSlice:
		stripMeta(&o.ObjectMeta, triggerTimeAnnotation)
	case *corev1.Node:
		stripMeta(&o.ObjectMeta)
		o.Spec = corev1.NodeSpec{}
		o.Status = corev1.NodeStatus{Addresses: o.Status.Addresses}
	case *corev1.ConfigMap:
		stripMeta(&o.ObjectMeta, rollout.ProgressAnnotation)
		o.BinaryData = nil
	case *networkingv1.ServiceCIDR:
		stripMeta(&o.ObjectMeta)
		o.Status = networkingv1.ServiceCIDRStatus{}
	}
	return obj, nil
}

// stripMeta drops the metadata the control plane never reads, keeping
// the named annotations.
func stripMeta(m *metav1.ObjectMeta, keep ...string) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	var kept map[string]string
	for _, k := range keep {
		if v, ok := m.Annotations[k]; ok {
			if kept == nil {
				kept = map[string]string{}
			}
			kept[k] = v
		}
	}
	m.Annotations = kept
}
