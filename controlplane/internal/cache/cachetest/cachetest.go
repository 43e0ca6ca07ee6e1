package cachetest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// marshal is the test encoding of a Resource: deterministic, as the
// compute side's, so equal resources give equal bytes.
var marshal = proto.MarshalOptions{Deterministic: true}

// NewView encodes r once into a cache.View. An empty r.Version is filled
// with the content hash of its body; r itself is not modified.
func NewView(r *switchyardv1.Resource) (*cache.View, error) {
	r = proto.Clone(r).(*switchyardv1.Resource)
	if r.GetVersion() == "" {
		v, err := contentVersion(r)
		if err != nil {
			return nil, err
		}
		r.Version = v
	}
	b, err := marshal.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode resource %q: %w", r.GetName(), err)
	}
	v := cache.NewView(r.GetName(), r.GetVersion(), b)
	return &v, nil
}

// MustView is NewView for literals in tests; it fails tb on an error.
func MustView(tb testing.TB, r *switchyardv1.Resource) *cache.View {
	tb.Helper()
	v, err := NewView(r)
	if err != nil {
		tb.Fatalf("cachetest.NewView: %v", err)
	}
	return v
}

// NodeView is an immutable cache.NodeView.
type NodeView struct {
	version string
	views   []*cache.View // sorted by name
	byName  map[string]*cache.View
}

var _ cache.NodeView = (*NodeView)(nil)

// NewNodeView builds a node view; a later view of the same name wins.
func NewNodeView(views ...*cache.View) *NodeView {
	byName := make(map[string]*cache.View, len(views))
	for _, v := range views {
		byName[v.Name] = v
	}
	sorted := make([]*cache.View, 0, len(byName))
	for _, v := range byName {
		sorted = append(sorted, v)
	}
	slices.SortFunc(sorted, func(a, b *cache.View) int { return strings.Compare(a.Name, b.Name) })
	nv := &NodeView{views: sorted, byName: byName}
	nv.version = systemVersion(nv)
	return nv
}

// With returns a copy of nv with views added or replaced.
func (nv *NodeView) With(views ...*cache.View) *NodeView {
	byName := maps.Clone(nv.byName)
	sorted := slices.Clone(nv.views)
	added := false
	for _, v := range views {
		if _, ok := byName[v.Name]; !ok {
			added = true
			sorted = append(sorted, v)
		} else if i, found := slices.BinarySearchFunc(sorted, v.Name, byNameCmp); found && !added {
			sorted[i] = v
		}
		byName[v.Name] = v
	}
	if added {
		return NewNodeView(slices.Collect(maps.Values(byName))...)
	}
	out := &NodeView{views: sorted, byName: byName}
	out.version = systemVersion(out)
	return out
}

func byNameCmp(v *cache.View, name string) int { return strings.Compare(v.Name, name) }

// Without returns a copy of nv without the named views.
func (nv *NodeView) Without(names ...string) *NodeView {
	keep := make([]*cache.View, 0, len(nv.views))
	for _, v := range nv.views {
		if !slices.Contains(names, v.Name) {
			keep = append(keep, v)
		}
	}
	return NewNodeView(keep...)
}

func (nv *NodeView) Version() string { return nv.version }
func (nv *NodeView) Len() int        { return len(nv.views) }

func (nv *NodeView) Get(name string) (*cache.View, bool) {
	v, ok := nv.byName[name]
	return v, ok
}

func (nv *NodeView) Range(fn func(*cache.View) bool) {
	for _, v := range nv.views {
		if !fn(v) {
			return
		}
	}
}

// Resources decodes every view of nv, in name order.
func Resources(nv cache.NodeView) ([]*switchyardv1.Resource, error) {
	var out []*switchyardv1.Resource
	var err error
	nv.Range(func(v *cache.View) bool {
		var r *switchyardv1.Resource
		r, err = cache.Decode(v)
		out = append(out, r)
		return err == nil
	})
	return out, err
}

// Service returns a ServiceView resource named namespace/name with the
// given cluster IP and one TCP port; vary ip or port to change its content.
func Service(namespace, name, clusterIP string, port uint32) *switchyardv1.Resource {
	return &switchyardv1.Resource{
		Name: namespace + "/" + name,
		Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
			Namespace:  namespace,
			Name:       name,
			Type:       switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
			ClusterIps: []string{clusterIP},
			Ports: []*switchyardv1.ServicePort{{
				Protocol: switchyardv1.Protocol_PROTOCOL_TCP,
				Port:     port,
			}},
		}},
	}
}

// NodeConfig returns the NodeConfig resource of a node.
func NodeConfig(node, zone string) *switchyardv1.Resource {
	return &switchyardv1.Resource{
		Name: node,
		Body: &switchyardv1.Resource_NodeConfig{NodeConfig: &switchyardv1.NodeConfig{
			NodeName: node,
			Zone:     zone,
		}},
	}
}

// Services returns n service views "ns/svc-000".."ns/svc-<n-1>", each with
// generation gen in its port so that a new gen changes every version.
func Services(tb testing.TB, namespace string, n int, gen uint32) []*cache.View {
	tb.Helper()
	out := make([]*cache.View, n)
	for i := range n {
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		out[i] = MustView(tb, Service(namespace, fmt.Sprintf("svc-%03d", i), ip, 1000+gen))
	}
	return out
}
