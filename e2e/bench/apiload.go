package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/e2e/bench/agentsim"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// APILoadOptions configure the API-load suite.
type APILoadOptions struct {
	// Agents are the node counts: agents behind one control plane, and
	// kube-proxy-shaped informer sets.
	Agents []int
	// KubeProxies real kube-proxy processes; 0 skips them.
	KubeProxies  int
	KubeProxyBin string
}

// kubeProxySelector is the label selector kube-proxy lists Services and
// EndpointSlices with.
const kubeProxySelector = "!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless"

// apiLoad is one API-load session: one API server, one small cluster.
type apiLoad struct {
	env      *Env
	srv      *apiserver.Server
	cluster  *LoadedCluster
	baseline watchCount
	save     func(Record) error
	missing  sync.Once
}

// watchCount is what the API server reports about watches.
type watchCount struct {
	watchers, watchRequests float64
	byResource              map[string]float64 // WATCH requests by resource
}

// RunAPILoad starts an API server holding 100 services × 10 endpoints and
// as many nodes as the largest setup, then counts the watches each setup
// holds over the API server's own: one control plane with N agents, N
// kube-proxy-shaped informer sets, and o.KubeProxies real kube-proxies.
func RunAPILoad(ctx context.Context, env *Env, o APILoadOptions, save func(Record) error) error {
	maxN := o.KubeProxies
	for _, n := range o.Agents {
		maxN = max(maxN, n)
	}
	srv, err := apiserver.StartContext(ctx, apiserver.NewConfig(apiserver.WithLogger(env.Log)))
	if err != nil {
		return err
	}
	defer func() { _ = srv.Stop() }()
	l := &apiLoad{env: env, srv: srv, save: save}
	if l.cluster, err = LoadAPI(ctx, srv, Generate(Shape{Nodes: maxN, Services: 100, Endpoints: 10}), 16); err != nil {
		return err
	}
	if l.baseline, err = l.settled(ctx); err != nil {
		return err
	}
	env.Log.Info("API server baseline", "watchers", l.baseline.watchers, "watchRequests", l.baseline.watchRequests)
	for _, n := range o.Agents {
		if err := l.switchyard(ctx, n); err != nil {
			return fmt.Errorf("switchyard, %d agents: %w", n, err)
		}
	}
	if o.KubeProxies > 0 {
		if err := l.kubeProxies(ctx, o.KubeProxies, o.KubeProxyBin); err != nil {
			return fmt.Errorf("%d kube-proxies: %w", o.KubeProxies, err)
		}
	}
	for _, n := range o.Agents {
		if err := l.informers(ctx, n); err != nil {
			return fmt.Errorf("%d informer sets: %w", n, err)
		}
	}
	return nil
}

// count reads the API server's watch metrics.
func (l *apiLoad) count(ctx context.Context) (watchCount, error) {
	raw, err := l.srv.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return watchCount{}, fmt.Errorf("API server /metrics: %w", err)
	}
	var c watchCount
	if c.watchRequests, err = sumMetric(bytesReader(raw), "apiserver_longrunning_requests", []string{`verb="WATCH"`}); err != nil {
		return c, err
	}
	c.byResource = watchesByResource(raw)
	// apiserver_registered_watchers is gone from v1.37 (the watch metrics
	// left are listed in the log): -1 marks it missing.
	if c.watchers, err = sumMetric(bytesReader(raw), "apiserver_registered_watchers", nil); err != nil {
		c.watchers = -1
		l.missing.Do(func() {
			l.env.Log.Info("apiserver_registered_watchers not exposed; counting WATCH requests only", "watchMetrics", watchMetrics(raw))
		})
	}
	return c, nil
}

// watchesByResource sums apiserver_longrunning_requests{verb="WATCH"} by
// resource.
func watchesByResource(raw []byte) map[string]float64 {
	by := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_longrunning_requests{")
		if !ok || !strings.Contains(rest, `verb="WATCH"`) {
			continue
		}
		_, res, _ := strings.Cut(rest, `resource="`)
		res, _, _ = strings.Cut(res, `"`)
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 1 {
			v, _ := strconv.ParseFloat(f[0], 64)
			by[res] += v
		}
	}
	return by
}

// diffByResource formats cur - base by resource, sorted, without zeros.
func diffByResource(cur, base map[string]float64) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		if d := cur[k] - base[k]; d != 0 {
			out = append(out, fmt.Sprintf("%s %+.0f", k, d))
		}
	}
	return strings.Join(out, ", ")
}

// watchMetrics lists the metric names that mention watches, for errors.
func watchMetrics(raw []byte) string {
	seen := map[string]bool{}
	var out []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if !strings.HasPrefix(line, "#") && strings.Contains(name, "watch") && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}

// settled returns the count once it held still for three reads in a row.
func (l *apiLoad) settled(ctx context.Context) (watchCount, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last watchCount
	have, same := false, 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		c, err := l.count(ctx)
		switch {
		case err != nil:
			// An overloaded API server may not answer; keep asking.
			l.env.Log.Warn("reading API server metrics", "err", err)
			same = 0
		case have && c.watchers == last.watchers && c.watchRequests == last.watchRequests:
			same++
			last = c
		default:
			last, have, same = c, true, 0
		}
		if same == 2 {
			return last, nil
		}
		select {
		case <-ctx.Done():
			if !have {
				return last, fmt.Errorf("no watch count: %w", errNoCount)
			}
			return last, fmt.Errorf("watch count did not settle: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// errNoCount: the API server never answered /metrics.
var errNoCount = errors.New("API server metrics unreadable")

func (l *apiLoad) record(ctx context.Context, setup string, n int, note string) error {
	c, err := l.settled(ctx)
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		note += "; count still moving after 2 min, last read"
	case err != nil:
		return err
	}
	_, rss, err := l.srv.RSS()
	if err != nil {
		return err
	}
	r := Record{
		Kind: "apiload", Setup: setup, Agents: n, Services: 100, Endpoints: 10, Started: time.Now(), LoadAvg: loadAvg(),
		Watchers: -1, LongRunning: c.watchRequests - l.baseline.watchRequests,
		APIServerRSS: rss, Note: note + "; WATCH: " + diffByResource(c.byResource, l.baseline.byResource),
	}
	if c.watchers >= 0 && l.baseline.watchers >= 0 {
		r.Watchers = c.watchers - l.baseline.watchers
	}
	l.env.Log.Info("API load", "setup", setup, "nodes", n, "watchers", r.Watchers, "watchRequests", r.LongRunning, "apiserverRssMiB", rss>>20)
	return l.save(r)
}

// switchyard runs one control plane with n agents.
func (l *apiLoad) switchyard(ctx context.Context, n int) error {
	args := []string{"--kubeconfig", l.srv.KubeconfigPath(), "--insecure", "--log-level", "warn"}
	p, err := startProcess(ctx, l.env.Bins.ControlPlane, args, l.env.WorkDir+"/cp-apiload.log", false, 2*time.Minute)
	if err != nil {
		return err
	}
	defer func() { _ = p.stop() }()
	fleet := agentsim.NewFleet(agentsim.Config{Target: p.grpc, Mode: agentsim.Delta}, l.cluster.NodeNames()[:n])
	actx, cancel := context.WithCancel(ctx)
	defer func() { cancel(); fleet.Stop() }()
	if err := fleet.Start(actx, 0, n); err != nil {
		return err
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer wcancel()
	if err := fleet.Wait(wctx, make([]int, n)); err != nil {
		return err
	}
	return l.record(ctx, "switchyard", n, "1 control plane; agents hold no API credentials")
}

// informers runs n client-go informer sets shaped like kube-proxy's, each
// on its own connection as n processes would be.
func (l *apiLoad) informers(ctx context.Context, n int) error {
	ictx, cancel := context.WithCancel(ctx)
	var factories []informers.SharedInformerFactory
	defer func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	var synced []cache.InformerSynced
	for _, node := range l.cluster.NodeNames()[:n] {
		cs, err := ownConnection(l.srv.RESTConfig(), "kube-proxy-informers/"+node)
		if err != nil {
			return err
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = kubeProxySelector
		}))
		nf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
		}))
		synced = append(synced, f.Core().V1().Services().Informer().HasSynced,
			f.Discovery().V1().EndpointSlices().Informer().HasSynced, nf.Core().V1().Nodes().Informer().HasSynced)
		f.Start(ictx.Done())
		nf.Start(ictx.Done())
		factories = append(factories, f, nf)
	}
	note := "client-go: Services + EndpointSlices (kube-proxy's selector) + own Node, one connection each"
	wctx, wcancel := context.WithTimeout(ictx, 5*time.Minute)
	defer wcancel()
	if !cache.WaitForCacheSync(wctx.Done(), synced...) {
		// An overloaded API server (or harness) is a result too: record
		// what it holds rather than fail the suite.
		note += "; NOT all synced after 5 min (relists after lost connections)"
	}
	return l.record(ctx, "kube-proxy-informers", n, note)
}

// ownConnection returns a clientset with its own TCP connection: a config
// with a Dial func is never served from client-go's shared transport cache.
func ownConnection(cfg *rest.Config, agent string) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = agent
	cfg.Dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("clientset: %w", err)
	}
	return cs, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
