package latency

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podTimes is what the harness's watches saw of one pod, each time taken
// when the informer delivered the change to this process.
type podTimes struct {
	Name, Node, IP string
	// ReadySeen is when the watch first saw the Ready condition True;
	// ReadyTransition is that condition's lastTransitionTime as the
	// kubelet wrote it (whole seconds: the trigger time kube-proxy's
	// metric starts from).
	ReadySeen, ReadyTransition time.Time
	// DeletionSeen is when the watch first saw deletionTimestamp set.
	DeletionSeen time.Time
	// Gone is when the pod object was deleted.
	Gone time.Time
	// SliceReadySeen is when an EndpointSlice first listed the pod as a
	// ready endpoint; SliceUnreadySeen when, after that, no slice did any
	// more (not ready, or removed).
	SliceReadySeen, SliceUnreadySeen time.Time
}

// tracker follows the workload's pods and its Service's EndpointSlices
// through informers and keeps podTimes per pod. Waiters are woken on
// every change.
type tracker struct {
	mu      sync.Mutex
	pods    map[string]*podTimes
	inSlice map[string]map[string]bool // slice name → pods it lists as ready
	changed chan struct{}              // closed and replaced on each change
}

// startTracker starts informers on the pods labelled app=<name> and the
// EndpointSlices of Service <name> in namespace ns, and returns once both
// have synced. They stop with ctx.
func startTracker(ctx context.Context, cs kubernetes.Interface, ns, name string) (*tracker, error) {
	t := &tracker{pods: map[string]*podTimes{}, inSlice: map[string]map[string]bool{}, changed: make(chan struct{})}
	pods := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = "app=" + name }))
	slices := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + name }))
	podInf := pods.Core().V1().Pods().Informer()
	sliceInf := slices.Discovery().V1().EndpointSlices().Informer()
	if _, err := podInf.AddEventHandler(eventsTo(t.pod)); err != nil {
		return nil, fmt.Errorf("pod watch: %w", err)
	}
	if _, err := sliceInf.AddEventHandler(eventsTo(t.slice)); err != nil {
		return nil, fmt.Errorf("EndpointSlice watch: %w", err)
	}
	pods.Start(ctx.Done())
	slices.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, sliceInf.HasSynced) {
		return nil, fmt.Errorf("watches did not sync: %w", context.Cause(ctx))
	}
	return t, nil
}

// eventsTo routes an informer's events to on, deleted telling whether
// the object went.
func eventsTo(on func(obj any, deleted bool)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj, false) },
		UpdateFunc: func(_, obj any) { on(obj, false) },
		DeleteFunc: func(obj any) { on(obj, true) },
	}
}

// get returns the record of pod name, creating it (t.mu held).
func (t *tracker) get(name string) *podTimes {
	p := t.pods[name]
	if p == nil {
		p = &podTimes{Name: name}
		t.pods[name] = p
	}
	return p
}

func (t *tracker) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// unwrap returns the object of a delete the informer missed the final
// state of.
func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (t *tracker) pod(obj any, deleted bool) {
	now := time.Now()
	pod, ok := unwrap(obj).(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.get(pod.Name)
	if pod.Spec.NodeName != "" {
		p.Node = pod.Spec.NodeName
	}
	if pod.Status.PodIP != "" {
		p.IP = pod.Status.PodIP
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.ReadySeen.IsZero() {
			p.ReadySeen, p.ReadyTransition = now, c.LastTransitionTime.Time
		}
	}
	if pod.DeletionTimestamp != nil && p.DeletionSeen.IsZero() {
		p.DeletionSeen = now
	}
	if deleted && p.Gone.IsZero() {
		p.Gone = now
	}
	t.notify()
}

func (t *tracker) slice(obj any, deleted bool) {
	now := time.Now()
	s, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	ready := map[string]bool{}
	if !deleted {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				ready[ep.TargetRef.Name] = true
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inSlice[s.Name] = ready
	if deleted {
		delete(t.inSlice, s.Name)
	}
	for name := range ready {
		if p := t.get(name); p.SliceReadySeen.IsZero() {
			p.SliceReadySeen = now
		}
	}
	for name, p := range t.pods {
		if !p.SliceReadySeen.IsZero() && p.SliceUnreadySeen.IsZero() && !t.listedReady(name) {
			p.SliceUnreadySeen = now
		}
	}
	t.notify()
}

// listedReady reports whether some slice lists pod as ready (t.mu held).
func (t *tracker) listedReady(pod string) bool {
	for _, pods := range t.inSlice {
		if pods[pod] {
			return true
		}
	}
	return false
}

// wait calls cond under the lock after every change until it returns
// true, and returns the pod it chose (a copy).
func (t *tracker) wait(ctx context.Context, what string, cond func(pods map[string]*podTimes) *podTimes) (podTimes, error) {
	for {
		t.mu.Lock()
		p := cond(t.pods)
		var out podTimes
		if p != nil {
			out = *p
		}
		ch := t.changed
		t.mu.Unlock()
		if p != nil {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return podTimes{}, fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-ch:
		}
	}
}

// names is the set of pods seen so far.
func (t *tracker) names() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(t.pods))
	for name := range t.pods {
		out[name] = true
	}
	return out
}
