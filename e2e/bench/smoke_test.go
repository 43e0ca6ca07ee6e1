package bench

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/switchyard-proxy/switchyard/e2e/bench/agentsim"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// TestSmoke runs the fan-out harness at a tiny size on both feed paths (path
// a only when the test bed binaries are built) and checks that its records
// are sane: every agent ACKed every change (RunFanout fails otherwise),
// latencies and byte counts are positive, and a one-endpoint change costs
// fewer bytes as a delta than as the whole view.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the control plane")
	}
	ctx := t.Context()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	shape := Shape{Nodes: 3, Services: 20, Endpoints: 2}
	opts := FanoutOptions{
		Changes: 3, Coalesce: 10 * time.Millisecond, ApplyDelay: time.Millisecond, Wave: 100,
		ChangeTimeout: 10 * time.Second, ReadyTimeout: 20 * time.Second, Decode: true,
	}
	paths := map[string]*LoadedCluster{PathFake: NewLoaded(Generate(shape))}
	// The API server starts while the binaries build.
	var srv *apiserver.Server
	var g errgroup.Group
	if err := apiserver.Available(); err == nil {
		g.Go(func() (err error) {
			srv, err = apiserver.StartContext(ctx, apiserver.NewConfig(apiserver.WithLogger(log)))
			return err
		})
	} else {
		t.Logf("path apiserver skipped: %v", err)
	}
	bins, err := Build(ctx, binDir(t), Binaries{})
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if srv != nil {
		t.Cleanup(func() { _ = srv.Stop() })
	}
	if err != nil {
		t.Fatal(err)
	}
	env := &Env{Bins: bins, WorkDir: t.TempDir(), Log: log, API: srv}
	if srv != nil {
		l, err := LoadAPI(ctx, srv, Generate(shape), 8)
		if err != nil {
			t.Fatal(err)
		}
		paths[PathAPIServer] = l
	}
	for path, cluster := range paths {
		bytes := map[agentsim.Mode]int64{}
		for _, mode := range []agentsim.Mode{agentsim.Delta, agentsim.SotW} {
			o := opts
			o.Path, o.Mode = path, mode
			rec, err := RunFanout(ctx, env, cluster, o)
			if err != nil {
				t.Fatalf("%s %s: %v", path, mode, err)
			}
			t.Logf("%s %s: %+v", path, mode, rec)
			checkRecord(t, rec, shape)
			bytes[mode] = rec.BytesPerChange
		}
		if bytes[agentsim.Delta] >= bytes[agentsim.SotW] {
			t.Errorf("%s: delta %d bytes per change, state of the world %d: want fewer", path, bytes[agentsim.Delta], bytes[agentsim.SotW])
		}
	}
}

// binDir is where the smoke test builds the control planes: a directory
// kept across runs, so go build finds them up to date and skips the link.
func binDir(t *testing.T) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return t.TempDir()
	}
	dir = filepath.Join(dir, "switchyard", "bench-bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return t.TempDir()
	}
	return dir
}

func checkRecord(t *testing.T, r Record, s Shape) {
	t.Helper()
	switch {
	case r.Agents != s.Nodes || r.Changes == 0:
		t.Errorf("record %+v: wrong shape", r)
	case r.LatencyP50MS <= 0 || r.LatencyP99MS < r.LatencyP50MS || r.LatencyMaxMS < r.LatencyP99MS:
		t.Errorf("latencies p50 %v p99 %v max %v", r.LatencyP50MS, r.LatencyP99MS, r.LatencyMaxMS)
	case r.BytesPerChange <= 0 || r.InitialBytesPerAgent <= 0:
		t.Errorf("bytes per change %d, initial per agent %d", r.BytesPerChange, r.InitialBytesPerAgent)
	case r.ResponsesPerChange < float64(s.Nodes):
		t.Errorf("%v responses per change for %d agents", r.ResponsesPerChange, s.Nodes)
	case r.PeakRSS == 0 || r.HeapInuse == 0:
		t.Errorf("peak RSS %d, heap in use %d", r.PeakRSS, r.HeapInuse)
	}
}
