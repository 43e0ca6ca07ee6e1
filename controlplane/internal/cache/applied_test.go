package cache_test

import (
	"fmt"
	"iter"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
)

var _ cache.ApplyObserver = (*fleetlatency.Tracker)(nil)

// applied is an ApplyObserver that records each call.
type applied struct {
	gen   uint64
	calls []appliedCall
}

type appliedCall struct {
	Gen   uint64
	Names []string
}

func (a *applied) Generation() uint64 { return a.gen }
func (a *applied) Applied(gen uint64, names iter.Seq[string]) {
	a.calls = append(a.calls, appliedCall{gen, slices.Collect(names)})
}

// takeAck is one cycle of a stream: it takes w's view and ACKs it.
func takeAck(w *cache.Watch) cache.NodeView {
	nv, _ := w.Take()
	w.Acked(nv, nil)
	return nv
}

// TestApplyObserver: an ACK tells the observer the names the acknowledged
// view brought to the node at their desired version, with the generation
// of the view the stream took; each step is the stream's Take then ACK.
func TestApplyObserver(t *testing.T) {
	svc := func(name string, port uint32) *cache.View {
		return cachetest.MustView(t, cachetest.Service("ns", name, "10.96.0.1", port))
	}
	base := cachetest.NewNodeView(svc("a", 1), svc("b", 1), svc("c", 1))
	tests := []struct {
		name string
		// run drives the cache after the stream's first Take and ACK of
		// base (published at generation 1); publish stamps generation
		// gen.
		run  func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied)
		want []appliedCall
	}{{
		name: "the changed name",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2)), []string{"ns/a"})
			takeAck(w)
		},
		want: []appliedCall{{2, []string{"ns/a"}}},
	}, {
		name: "a name listed that did not change for the node",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2)), []string{"ns/a", "ns/b", "ns/gone"})
			takeAck(w)
		},
		want: []appliedCall{{2, []string{"ns/a"}}},
	}, {
		name: "desired moved on after the take: that name does not count",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2), svc("b", 2)), []string{"ns/a", "ns/b"})
			nv, _ := w.Take()
			o.gen = 3
			c.Publish("n1", base.With(svc("a", 2), svc("b", 3)), []string{"ns/b"})
			w.Acked(nv, nil)
		},
		want: []appliedCall{{2, []string{"ns/a"}}},
	}, {
		name: "after a NACK, the rejected names count with the next ACK",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2)), []string{"ns/a"})
			w.Take()
			w.Nacked(&spb.Status{Code: 3})
			o.gen = 3
			c.Publish("n1", base.With(svc("a", 2), svc("c", 2)), []string{"ns/c"})
			takeAck(w)
		},
		want: []appliedCall{{3, []string{"ns/a", "ns/c"}}},
	}, {
		name: "unknown changes: every name of the view is compared",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("b", 2), svc("d", 1)), nil)
			takeAck(w)
		},
		want: []appliedCall{{2, []string{"ns/b", "ns/d"}}},
	}, {
		name: "an ACK of a view other than the one taken tells nothing",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2)), []string{"ns/a"})
			w.Take()
			w.Acked(base.With(svc("a", 2), svc("b", 2)), nil)
		},
		want: []appliedCall{},
	}, {
		name: "the next ACK of the same view: nothing new",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			nv := base.With(svc("a", 2))
			c.Publish("n1", nv, []string{"ns/a"})
			w.Take()
			w.Acked(nv, nil)
			w.Take()
			w.Acked(nv, nil)
		},
		want: []appliedCall{{2, []string{"ns/a"}}, {2, nil}},
	}, {
		name: "a replaced watch tells nothing",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2)), []string{"ns/a"})
			nv, _ := w.Take()
			c.Watch("n1", agent("n1"), "delta")
			w.Acked(nv, nil)
		},
		want: []appliedCall{},
	}, {
		name: "a new stream's first ACK tells nothing, its second does",
		run: func(t *testing.T, c *cache.Cache, w *cache.Watch, o *applied) {
			w.Close()
			o.gen = 2
			c.Publish("n1", base.With(svc("a", 2)), []string{"ns/a"})
			w2 := c.Watch("n1", agent("n1"), "delta")
			nv := takeAck(w2)
			o.gen = 3
			c.Publish("n1", nv.(*cachetest.NodeView).With(svc("b", 2)), []string{"ns/b"})
			takeAck(w2)
		},
		want: []appliedCall{{3, []string{"ns/b"}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &applied{gen: 1}
			c := cache.New(cache.WithApplyObserver(o))
			c.Publish("n1", base, nil)
			w := c.Watch("n1", agent("n1"), "delta")
			takeAck(w)
			tt.run(t, c, w, o)
			if o.calls == nil {
				o.calls = []appliedCall{}
			}
			if d := cmp.Diff(tt.want, o.calls); d != "" {
				t.Errorf("Applied calls (-want +got):\n%s", d)
			}
		})
	}
}

// BenchmarkAcked is the ACK-time hook: a stream's cycle (Publish of a
// view in which n of 10,000 services changed, Take, Acked) without an
// observer and with the fleet latency tracker; the difference is the
// hook. Every ACK brings all n at a new version, each with a change
// recorded (the view alternates between two generations).
func BenchmarkAcked(b *testing.B) {
	for _, observed := range []bool{false, true} {
		for _, n := range []int{1, 100, 10000} {
			b.Run(fmt.Sprintf("tracker=%v/names=%d", observed, n), func(b *testing.B) {
				tr := fleetlatency.New(fleetlatency.WithClock(clock.RealClock{}))
				var opts []cache.Option
				if observed {
					opts = append(opts, cache.WithApplyObserver(tr))
				}
				c := cache.New(opts...)
				views := [2][]*cache.View{cachetest.Services(b, "ns", 10000, 0), cachetest.Services(b, "ns", 10000, 1)}
				nvs := [2]*cachetest.NodeView{cachetest.NewNodeView(views[0]...), cachetest.NewNodeView(views[0]...).With(views[1][:n]...)}
				var names []string
				for _, v := range views[0][:n] {
					names = append(names, v.Name)
				}
				c.Publish("n1", nvs[0], nil)
				w := c.Watch("n1", agent("n1"), "delta")
				takeAck(w)
				tr.ServicesChanged(names, nil, nil)
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					i ^= 1
					c.Publish("n1", nvs[i], names)
					nv, _ := w.Take()
					w.Acked(nv, nil)
				}
				b.StopTimer()
				if st, _ := tr.Service(names[0]); observed != (st.Samples > 0) {
					b.Fatalf("samples = %d, tracker %v", st.Samples, observed)
				}
			})
		}
	}
}
