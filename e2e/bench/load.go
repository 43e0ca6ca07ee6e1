package bench

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	tbslices "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// LoadedCluster is a generated cluster as a control plane sees it, with the
// index of the next change. Runs over the same LoadedCluster continue its
// changes, so every change differs from the state before it.
type LoadedCluster struct {
	*Cluster
	next   int
	client *tbslices.Client // path a: writes to the API server
	ids    map[string]int   // service name → index
}

// NewLoaded wraps c for path fake (each run loads it into a fresh process).
func NewLoaded(c *Cluster) *LoadedCluster {
	l := &LoadedCluster{Cluster: c, ids: make(map[string]int, len(c.Services))}
	for i, s := range c.Services {
		l.ids[s.Name] = i
	}
	return l
}

// identity returns the named service as path fake's API objects carry it.
func (l *LoadedCluster) identity(name string) *corev1.Service {
	i := l.ids[name]
	return withIdentity(l.Services[i], i)
}

// LoadAPI creates c's namespace, nodes, services and slices in srv, with
// `parallel` writers.
func LoadAPI(ctx context.Context, srv *apiserver.Server, c *Cluster, parallel int) (*LoadedCluster, error) {
	cs := srv.Client()
	l := NewLoaded(c)
	l.client = tbslices.New(cs)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, n := range c.Nodes {
		g.Go(func() error {
			_, err := cs.CoreV1().Nodes().Create(gctx, n, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create node %s: %w", n.Name, err)
			}
			return nil
		})
	}
	for i, svc := range c.Services {
		g.Go(func() error {
			created, err := cs.CoreV1().Services(Namespace).Create(gctx, svc, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create service %s: %w", svc.Name, err)
			}
			es, err := tbslices.Build(created, c.Slices[i], metav1.Now().Time)
			if err != nil {
				return err
			}
			if _, err := cs.DiscoveryV1().EndpointSlices(Namespace).Create(gctx, es, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create EndpointSlice %s: %w", es.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return l, nil
}

// shapeTag names a shape in file names.
func shapeTag(s Shape) string {
	return "n" + strconv.Itoa(s.Nodes) + "-" + strconv.Itoa(s.Services) + "x" + strconv.Itoa(s.Endpoints)
}
