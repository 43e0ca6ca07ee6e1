package apistatus

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Wrap returns lw reporting to t under resource, repeating calls while the
// server is unreachable (see the package comment). lw's WatchList
// capability is kept: the reflector asks the wrapper.
func (t *Tracker) Wrap(resource string, lw cache.ListerWatcher) cache.ListerWatcher {
	t.Register(resource)
	return &listWatch{t: t, resource: resource, inner: cache.ToListerWatcherWithContext(lw), orig: lw}
}

type listWatch struct {
	t        *Tracker
	resource string
	inner    cache.ListerWatcherWithContext
	orig     cache.ListerWatcher
}

var (
	_ cache.ListerWatcher            = (*listWatch)(nil)
	_ cache.ListerWatcherWithContext = (*listWatch)(nil)
)

func (l *listWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	for {
		obj, err := l.inner.ListWithContext(ctx, opts)
		if l.t.observe(l.resource, "list", err) != unreachable || !l.t.wait(ctx) {
			return obj, err
		}
	}
}

func (l *listWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	for {
		w, err := l.inner.WatchWithContext(ctx, opts)
		if l.t.observe(l.resource, "watch", err) != unreachable || !l.t.wait(ctx) {
			return w, err
		}
	}
}

// List and Watch serve callers without a context; the reflector uses the
// context variants.
func (l *listWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *listWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// IsWatchListSemanticsUnSupported forwards the wrapped ListerWatcher's
// answer: an in-memory fake clientset says it cannot stream lists, and
// the reflector must still know.
func (l *listWatch) IsWatchListSemanticsUnSupported() bool {
	u, ok := l.orig.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}
