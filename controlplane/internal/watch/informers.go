package watch

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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
	factories []informers.SharedInformerFactory
	services  cache.SharedIndexInformer
	slices    cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer
	// serviceCIDRs is nil when the API serves no ServiceCIDRs.
	serviceCIDRs cache.SharedIndexInformer
}

// newInformers makes the informers; the ServiceCIDR one only with
// serviceCIDRs (the API serves them).
func newInformers(client kubernetes.Interface, resync time.Duration, serviceCIDRs bool) *informerSet {
	withSelector := func(sel string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel })
	}
	strip := informers.WithTransform(stripObject)
	svcF := informers.NewSharedInformerFactoryWithOptions(client, resync, withSelector(serviceSelector), strip)
	sliceF := informers.NewSharedInformerFactoryWithOptions(client, resync, withSelector(sliceSelector), strip)
	nodeF := informers.NewSharedInformerFactoryWithOptions(client, resync, strip)
	s := &informerSet{
		factories: []informers.SharedInformerFactory{svcF, sliceF, nodeF},
		services:  svcF.Core().V1().Services().Informer(),
		slices:    sliceF.Discovery().V1().EndpointSlices().Informer(),
		nodes:     nodeF.Core().V1().Nodes().Informer(),
	}
	if serviceCIDRs {
		// Unfiltered, as Nodes: the same factory serves both.
		s.serviceCIDRs = nodeF.Networking().V1().ServiceCIDRs().Informer()
	}
	return s
}

func (s *informerSet) start(stop <-chan struct{}) {
	for _, f := range s.factories {
		f.Start(stop)
	}
}

func (s *informerSet) shutdown() {
	for _, f := range s.factories {
		f.Shutdown()
	}
}

func (s *informerSet) synced() []cache.InformerSynced {
	out := []cache.InformerSynced{s.services.HasSynced, s.slices.HasSynced, s.nodes.HasSynced}
	if s.serviceCIDRs != nil {
		out = append(out, s.serviceCIDRs.HasSynced)
	}
	return out
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
// other than the trigger time, the parts of Node that dominate its size
// (images, conditions, volumes) and a ServiceCIDR's status. Informers
// keep tombstones as they are.
func stripObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		stripMeta(&o.ObjectMeta, false)
	case *discoveryv1.EndpointSlice:
		stripMeta(&o.ObjectMeta, true)
	case *corev1.Node:
		stripMeta(&o.ObjectMeta, false)
		o.Spec = corev1.NodeSpec{}
		o.Status = corev1.NodeStatus{Addresses: o.Status.Addresses}
	case *networkingv1.ServiceCIDR:
		stripMeta(&o.ObjectMeta, false)
		o.Status = networkingv1.ServiceCIDRStatus{}
	}
	return obj, nil
}

func stripMeta(m *metav1.ObjectMeta, keepTrigger bool) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	var keep map[string]string
	if t, ok := m.Annotations[triggerTimeAnnotation]; ok && keepTrigger {
		keep = map[string]string{triggerTimeAnnotation: t}
	}
	m.Annotations = keep
}
