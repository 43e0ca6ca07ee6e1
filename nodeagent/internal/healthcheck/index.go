package healthcheck

import (
	"maps"
	"slices"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/view"
)

// Index keeps the health-check services of the applied view between
// syncs, so that a sync that changed a few services looks at those only:
// Services walks and sorts every resource, ~1 ms at 10,000 services,
// on every sync. The zero value is ready; not safe for concurrent use.
type Index struct {
	byName map[string]Service
	// known: byName is the applied view's (a first Update, or one with
	// unknown changes, walks the whole view).
	known bool
}

// Update brings the index to v, given the names that may have changed
// since the last Update (nil: unknown). It returns the services sorted by
// name and whether they may differ from the last ones returned.
func (x *Index) Update(v *view.View, changed map[string]struct{}) ([]Service, bool) {
	if changed == nil || !x.known {
		x.byName, x.known = map[string]Service{}, true
		for name, r := range v.Resources {
			if svc, ok := serviceOf(r); ok {
				x.byName[name] = svc
			}
		}
		return x.sorted(), true
	}
	moved := false
	for name := range changed {
		old, had := x.byName[name]
		svc, has := serviceOf(v.Resources[name])
		switch {
		case has && (!had || old != svc):
			x.byName[name], moved = svc, true
		case !has && had:
			delete(x.byName, name)
			moved = true
		}
	}
	return x.sorted(), moved
}

// sorted is the services by resource name, as Services lists them.
func (x *Index) sorted() []Service {
	names := slices.Sorted(maps.Keys(x.byName))
	out := make([]Service, len(names))
	for i, n := range names {
		out[i] = x.byName[n]
	}
	return out
}
