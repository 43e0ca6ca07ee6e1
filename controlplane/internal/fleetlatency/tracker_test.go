package fleetlatency_test

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/fleetlatency"
)

var t0 = time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)

// ackAfter records one ACK of name, d after the clock's time, of a view
// published at the current generation.
func ackAfter(tr *fleetlatency.Tracker, clk *clocktesting.FakePassiveClock, d time.Duration, names ...string) {
	at := clk.Now()
	clk.SetTime(at.Add(d))
	tr.Applied(tr.Generation(), slices.Values(names))
	clk.SetTime(at)
}

// resolution is how far above the true value a quantile may be.
const resolution = 1.0905077326652577 // 2^(1/8)

func TestQuantiles(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	tests := []struct {
		name    string
		samples []time.Duration
		// p50 and p99 are the true nearest-rank quantiles; the reported
		// ones are within [true, true·2^(1/8)] and at most the largest.
		p50, p99 time.Duration
		// exact, when set, is what both must be (one bucket, or clamped).
		exact50, exact99 time.Duration
	}{
		{name: "one sample: the sample itself", samples: []time.Duration{ms(310)}, exact50: ms(310), exact99: ms(310)},
		{name: "under 1ms: 1ms or the largest", samples: []time.Duration{ms(0.2), ms(0.5)}, exact50: ms(0.5), exact99: ms(0.5)},
		{name: "negative counts as zero", samples: []time.Duration{-ms(5)}, exact50: 0, exact99: 0},
		{name: "beyond the last bucket: the largest", samples: []time.Duration{time.Hour, 2 * time.Hour}, exact50: 2 * time.Hour, exact99: 2 * time.Hour},
		{name: "two far apart", samples: []time.Duration{ms(10), ms(1000)}, p50: ms(10), p99: ms(1000)},
		{
			name:    "4998 fast, 2 slow of 5000: p99 among the fast",
			samples: slices.Concat(repeat(ms(300), 4900), repeat(ms(310), 98), repeat(ms(1200), 2)),
			p50:     ms(300), p99: ms(310),
		},
		{
			name: "1..100ms: p50 50ms, p99 99ms",
			samples: func() []time.Duration {
				var out []time.Duration
				for i := 100; i >= 1; i-- {
					out = append(out, ms(float64(i)))
				}
				return out
			}(),
			p50: ms(50), p99: ms(99),
		},
		{name: "minutes", samples: []time.Duration{3 * time.Minute, 5 * time.Minute, 7 * time.Minute}, p50: 5 * time.Minute, p99: 7 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			tr := fleetlatency.New(fleetlatency.WithClock(clk))
			tr.ServicesChanged([]string{"shop/web"}, nil, nil)
			for _, d := range tt.samples {
				ackAfter(tr, clk, d, "shop/web")
			}
			st, ok := tr.Service("shop/web")
			if !ok || st.Samples != len(tt.samples) || !st.Changed.Equal(t0) {
				t.Fatalf("Service = %+v, %v; want %d samples since %v", st, ok, len(tt.samples), t0)
			}
			largest := slices.Max(tt.samples)
			for _, q := range []struct {
				q           float64
				true, exact time.Duration
				name        string
			}{{0.5, tt.p50, tt.exact50, "p50"}, {0.99, tt.p99, tt.exact99, "p99"}} {
				got := st.Quantile(q.q)
				if q.true == 0 {
					if got != q.exact {
						t.Errorf("%s = %v, want %v", q.name, got, q.exact)
					}
					continue
				}
				hi := time.Duration(math.Ceil(float64(q.true)*resolution)) + 1
				if got < q.true || got > hi || got > largest {
					t.Errorf("%s = %v, want in [%v, %v] and at most %v", q.name, got, q.true, hi, largest)
				}
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestChanges: a change resets the service's latencies; removal drops it;
// ACKs of views published before the change, and of names with no change,
// count for nothing.
func TestChanges(t *testing.T) {
	type step struct {
		changed, removed []string
		// ack: names acknowledged after ackAfter, of a view stamped
		// staleBy generations before the current one.
		ack      []string
		ackAfter time.Duration
		staleBy  uint64
	}
	type want struct {
		samples int
		p99     time.Duration
	}
	tests := []struct {
		name  string
		steps []step
		want  map[string]want // absent: no entry
	}{
		{
			name: "ACKs count",
			steps: []step{
				{changed: []string{"a/web", "a/db"}},
				{ack: []string{"a/web", "a/db"}, ackAfter: 2 * time.Second},
				{ack: []string{"a/web"}, ackAfter: 2 * time.Second},
			},
			want: map[string]want{"a/web": {2, 2 * time.Second}, "a/db": {1, 2 * time.Second}},
		},
		{
			name: "a new change resets",
			steps: []step{
				{changed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: 9 * time.Second},
				{changed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: 2 * time.Second},
			},
			want: map[string]want{"a/web": {1, 2 * time.Second}},
		},
		{
			name: "a change of another service keeps the latencies",
			steps: []step{
				{changed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: 2 * time.Second},
				{changed: []string{"a/db"}},
			},
			want: map[string]want{"a/web": {1, 2 * time.Second}, "a/db": {}},
		},
		{
			name: "a view published before the change does not count for it",
			steps: []step{
				{changed: []string{"a/web"}},
				{changed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: time.Second, staleBy: 1},
			},
			want: map[string]want{"a/web": {}},
		},
		{
			name: "a later view counts for an earlier change",
			steps: []step{
				{changed: []string{"a/web"}},
				{changed: []string{"a/db"}},
				{ack: []string{"a/web"}, ackAfter: time.Second},
			},
			want: map[string]want{"a/web": {1, time.Second}, "a/db": {}},
		},
		{
			name: "names without a change are ignored",
			steps: []step{
				{ack: []string{"a/web", "node-a"}, ackAfter: time.Second},
				{changed: []string{"a/web"}},
				{ack: []string{"node-a"}, ackAfter: time.Second},
			},
			want: map[string]want{"a/web": {}},
		},
		{
			name: "removal drops the entry",
			steps: []step{
				{changed: []string{"a/web", "a/db"}},
				{ack: []string{"a/web"}, ackAfter: time.Second},
				{removed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: time.Second},
			},
			want: map[string]want{"a/db": {}},
		},
		{
			name: "removed and added again: a new change",
			steps: []step{
				{changed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: 5 * time.Second},
				{removed: []string{"a/web"}},
				{changed: []string{"a/web"}},
				{ack: []string{"a/web"}, ackAfter: time.Second},
			},
			want: map[string]want{"a/web": {1, time.Second}},
		},
		{
			name: "listed twice in one change",
			steps: []step{
				{changed: []string{"a/web", "a/web"}},
				{ack: []string{"a/web"}, ackAfter: time.Second},
			},
			want: map[string]want{"a/web": {1, time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(t0)
			tr := fleetlatency.New(fleetlatency.WithClock(clk))
			for _, s := range tt.steps {
				if len(s.changed) > 0 || len(s.removed) > 0 {
					tr.ServicesChanged(s.changed, s.removed, nil)
				}
				if len(s.ack) > 0 {
					at := clk.Now()
					clk.SetTime(at.Add(s.ackAfter))
					tr.Applied(tr.Generation()-s.staleBy, slices.Values(s.ack))
					clk.SetTime(at)
				}
			}
			got := map[string]want{}
			for _, name := range []string{"a/web", "a/db", "node-a"} {
				if st, ok := tr.Service(name); ok {
					got[name] = want{st.Samples, st.Quantile(0.99)}
				}
			}
			if len(got) != len(tt.want) || tr.Len() != len(tt.want) {
				t.Errorf("entries %v (Len %d), want %v", got, tr.Len(), tt.want)
			}
			for name, w := range tt.want {
				if g, ok := got[name]; !ok || g != w {
					t.Errorf("%s: samples, p99 = %+v (present %v), want %+v", name, g, ok, w)
				}
			}
		})
	}
}

// TestBounded: the memory is one fixed-size entry per changed service,
// whatever the number of nodes and samples.
func TestBounded(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(t0)
	tr := fleetlatency.New(fleetlatency.WithClock(clk))
	names := make([]string, 100)
	for i := range names {
		names[i] = fmt.Sprintf("ns/svc-%d", i)
	}
	tr.ServicesChanged(names, nil, nil)
	before := heapAfterGC(t)
	// 5,000 nodes ACK every service, then names with no change.
	for n := range 5000 {
		ackAfter(tr, clk, time.Duration(n)*time.Millisecond, names...)
	}
	ackAfter(tr, clk, time.Second, "node-a", "other/svc")
	grown := heapAfterGC(t) - before
	if tr.Len() != len(names) {
		t.Errorf("Len = %d after ACKs, want %d", tr.Len(), len(names))
	}
	if grown > 64<<10 {
		t.Errorf("500,000 samples grew the heap by %d bytes, want nothing per sample", grown)
	}
	st, _ := tr.Service("ns/svc-7")
	if st.Samples != 5000 {
		t.Errorf("samples = %d, want 5000", st.Samples)
	}
	tr.ServicesChanged(nil, names[:60], nil)
	if tr.Len() != 40 {
		t.Errorf("Len = %d after removing 60, want 40", tr.Len())
	}
}

func heapAfterGC(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestConcurrent: ACKs, changes and reads at once (for -race).
func TestConcurrent(t *testing.T) {
	tr := fleetlatency.New()
	names := []string{"a/1", "a/2", "a/3"}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				tr.Applied(tr.Generation(), slices.Values(names))
			}
		})
	}
	wg.Go(func() {
		for range 200 {
			tr.ServicesChanged(names, nil, nil)
			tr.ServicesChanged(nil, names[:1], nil)
		}
	})
	wg.Go(func() {
		for range 1000 {
			if st, ok := tr.Service("a/2"); ok {
				_ = st.Quantile(0.99)
			}
		}
	})
	wg.Wait()
}

// BenchmarkApplied is the ACK-time cost of a batch of 10,000 names, every
// one with a change.
func BenchmarkApplied(b *testing.B) {
	tr := fleetlatency.New()
	names := make([]string, 10000)
	for i := range names {
		names[i] = fmt.Sprintf("namespace-%d/service-%d", i%100, i)
	}
	tr.ServicesChanged(names, nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		tr.Applied(tr.Generation(), slices.Values(names))
	}
}
