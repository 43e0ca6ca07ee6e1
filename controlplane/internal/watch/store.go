package watch

import (
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/translate"
)

// store owns the model.State: it applies a batch of changed keys by reading
// each object's newest version from its informer store and translating it.
// Only the watch loop's goroutine uses it.
type store struct {
	st  *model.State
	rec translate.Recorder
	log *slog.Logger
	// owner maps a slice to the service it was last filed under, so a
	// deleted slice (or one relabelled to another service) is found.
	owner map[model.SliceKey]model.ServiceKey

	services, slices, nodes cache.Store
}

// changes is what one batch changed in the model.
type changes struct {
	services []model.ServiceKey
	nodes    []string
}

func (s *store) apply(b batch) changes {
	touched := map[model.ServiceKey]struct{}{}
	for k := range b.services {
		s.applyService(k)
		touched[k] = struct{}{}
	}
	for k := range b.slices {
		for _, svc := range s.applySlice(k) {
			touched[svc] = struct{}{}
		}
	}
	var out changes
	for k := range touched {
		out.services = append(out.services, k)
	}
	for name := range b.nodes {
		s.applyNode(name)
		out.nodes = append(out.nodes, name)
	}
	return out
}

func (s *store) applyService(k model.ServiceKey) {
	obj, ok := get[*corev1.Service](s.services, k.Namespace+"/"+k.Name)
	if !ok {
		delete(s.st.Services, k)
		return
	}
	svc, err := translate.Service(obj, s.rec)
	if err != nil {
		s.log.Debug("service skipped", "service", k.String(), "err", err)
		delete(s.st.Services, k)
		return
	}
	s.st.Services[k] = svc
}

// applySlice files the slice's newest state and returns the services whose
// endpoints changed: its service, and the previous one if it moved.
func (s *store) applySlice(k model.SliceKey) []model.ServiceKey {
	var touched []model.ServiceKey
	if prev, ok := s.owner[k]; ok {
		s.unfile(prev, k)
		touched = append(touched, prev)
	}
	obj, ok := get[*discoveryv1.EndpointSlice](s.slices, k.Namespace+"/"+k.Name)
	if !ok {
		return touched
	}
	slice, err := translate.EndpointSlice(obj, s.rec)
	if err != nil {
		s.log.Debug("endpointslice skipped", "endpointSlice", k.Namespace+"/"+k.Name, "err", err)
		return touched
	}
	bySvc := s.st.Slices[slice.Service]
	if bySvc == nil {
		bySvc = map[model.SliceKey]*model.EndpointSlice{}
		s.st.Slices[slice.Service] = bySvc
	}
	bySvc[k] = slice
	s.owner[k] = slice.Service
	if len(touched) == 0 || touched[0] != slice.Service {
		touched = append(touched, slice.Service)
	}
	return touched
}

func (s *store) unfile(svc model.ServiceKey, k model.SliceKey) {
	delete(s.owner, k)
	if bySvc := s.st.Slices[svc]; bySvc != nil {
		delete(bySvc, k)
		if len(bySvc) == 0 {
			delete(s.st.Slices, svc)
		}
	}
}

func (s *store) applyNode(name string) {
	obj, ok := get[*corev1.Node](s.nodes, name)
	if !ok {
		delete(s.st.Nodes, name)
		return
	}
	node, err := translate.Node(obj, s.rec)
	if err != nil {
		s.log.Debug("node skipped", "node", name, "err", err)
		delete(s.st.Nodes, name)
		return
	}
	s.st.Nodes[name] = node
}

// get reads one object of type T from an informer store.
func get[T any](st cache.Store, key string) (T, bool) {
	var zero T
	obj, exists, err := st.GetByKey(key)
	if err != nil || !exists {
		return zero, false
	}
	t, ok := obj.(T)
	return t, ok
}
