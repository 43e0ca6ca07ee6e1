package watch

import (
	"log/slog"
	"maps"
	"slices"
	"time"

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
	// serviceCIDRs is nil when the API serves no ServiceCIDRs.
	serviceCIDRs cache.Store
}

// changes is what one batch changed in the model.
type changes struct {
	services []model.ServiceKey
	nodes    []string
	// triggers holds, by service, the last-change-trigger-time of each of
	// its EndpointSlices the batch added or updated, for a service none
	// of whose slices the batch deleted (kube-proxy's rule: a deletion
	// clears the service's pending times, since a deleted slice's
	// annotation dates its last update, not the deletion).
	triggers map[model.ServiceKey][]time.Time
}

func (s *store) apply(b batch) changes {
	touched := map[model.ServiceKey]struct{}{}
	for k := range b.services {
		s.applyService(k)
		touched[k] = struct{}{}
	}
	out := changes{triggers: map[model.ServiceKey][]time.Time{}}
	deleted := map[model.ServiceKey]bool{}
	for k := range b.slices {
		filed, left := s.applySlice(k)
		if left != nil {
			touched[*left] = struct{}{}
			if filed == nil || filed.Service != *left {
				deleted[*left] = true
			}
		}
		if filed != nil {
			touched[filed.Service] = struct{}{}
			if !filed.TriggerTime.IsZero() {
				out.triggers[filed.Service] = append(out.triggers[filed.Service], filed.TriggerTime)
			}
		}
	}
	for svc := range deleted {
		delete(out.triggers, svc)
	}
	for k := range touched {
		out.services = append(out.services, k)
	}
	for name := range b.nodes {
		s.applyNode(name)
		out.nodes = append(out.nodes, name)
	}
	// No key to pass on: nodeview.Index.Update compares the ranges of
	// every ServiceCIDR on each update (they are few).
	for name := range b.serviceCIDRs {
		s.applyServiceCIDR(name)
	}
	return out
}

func (s *store) applyServiceCIDR(name string) {
	if s.serviceCIDRs != nil {
		refile(s, s.serviceCIDRs, name, "serviceCIDR", name, s.st.ServiceCIDRs, translate.ServiceCIDR)
	}
}

func (s *store) applyService(k model.ServiceKey) {
	refile(s, s.services, k.Namespace+"/"+k.Name, "service", k, s.st.Services, translate.Service)
}

// applySlice files the slice's newest state. It returns the slice as filed
// (nil: it is gone, or skipped) and the service it was filed under before
// (nil: none); both services' endpoints may have changed.
func (s *store) applySlice(k model.SliceKey) (filed *model.EndpointSlice, left *model.ServiceKey) {
	if prev, ok := s.owner[k]; ok {
		s.unfile(prev, k)
		left = &prev
	}
	obj, ok := get[*discoveryv1.EndpointSlice](s.slices, k.Namespace+"/"+k.Name)
	if !ok {
		return nil, left
	}
	slice, err := translate.EndpointSlice(obj, s.rec)
	if err != nil {
		s.log.Debug("endpointslice skipped", "endpointSlice", k.Namespace+"/"+k.Name, "err", err)
		return nil, left
	}
	bySvc := s.st.Slices[slice.Service]
	if bySvc == nil {
		bySvc = map[model.SliceKey]*model.EndpointSlice{}
		s.st.Slices[slice.Service] = bySvc
	}
	bySvc[k] = slice
	s.owner[k] = slice.Service
	return slice, left
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
	refile(s, s.nodes, name, "node", name, s.st.Nodes, translate.Node)
}

// refile sets into[k] to the translation of the newest object stored
// under key in from, or deletes it when the object is gone or skipped
// (logged under logKey). One object of the model per API object:
// services, nodes and ServiceCIDRs.
func refile[T any, K comparable, M any](s *store, from cache.Store, key, logKey string, k K, into map[K]M,
	tr func(T, translate.Recorder) (M, error)) {
	obj, ok := get[T](from, key)
	if !ok {
		delete(into, k)
		return
	}
	m, err := tr(obj, s.rec)
	if err != nil {
		s.log.Debug(logKey+" skipped", logKey, key, "err", err)
		delete(into, k)
		return
	}
	into[k] = m
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

// serviceKeys lists every service of the state, in no order.
func (s *store) serviceKeys() []model.ServiceKey {
	return slices.Collect(maps.Keys(s.st.Services))
}
