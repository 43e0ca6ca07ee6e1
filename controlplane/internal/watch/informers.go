package watch

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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

// informerSet is the three informers the control plane needs.
type informerSet struct {
	factories []informers.SharedInformerFactory
	services  cache.SharedIndexInformer
	slices    cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer
}

func newInformers(client kubernetes.Interface, resync time.Duration) *informerSet {
	withSelector := func(sel string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel })
	}
	strip := informers.WithTransform(stripObject)
	svcF := informers.NewSharedInformerFactoryWithOptions(client, resync, withSelector(serviceSelector), strip)
	sliceF := informers.NewSharedInformerFactoryWithOptions(client, resync, withSelector(sliceSelector), strip)
	nodeF := informers.NewSharedInformerFactoryWithOptions(client, resync, strip)
	return &informerSet{
		factories: []informers.SharedInformerFactory{svcF, sliceF, nodeF},
		services:  svcF.Core().V1().Services().Informer(),
		slices:    sliceF.Discovery().V1().EndpointSlices().Informer(),
		nodes:     nodeF.Core().V1().Nodes().Informer(),
	}
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
	return []cache.InformerSynced{s.services.HasSynced, s.slices.HasSynced, s.nodes.HasSynced}
}

// stripObject drops what the control plane never reads before the object is
// cached: managedFields (often most of an object's bytes), annotations
// other than the trigger time, and the parts of Node that dominate its size
// (images, conditions, volumes). Informers keep tombstones as they are.
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
