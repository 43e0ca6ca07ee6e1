package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/bench/agentsim"
	"github.com/switchyard-proxy/switchyard/e2e/bench/procstat"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	tbslices "github.com/switchyard-proxy/switchyard/e2e/testbed/slices"
)

// Feed paths.
const (
	PathAPIServer = "apiserver" // path a: kube-apiserver + etcd of the test bed
	PathFake      = "fake"      // path b: in-memory clientset in the control plane
)

// FanoutOptions configure one fan-out run.
type FanoutOptions struct {
	Path       string
	Mode       agentsim.Mode
	Changes    int
	ApplyDelay time.Duration
	Coalesce   time.Duration
	// Wave is how many agents dial at once; each wave waits for its first
	// views before the next dials.
	Wave int
	// ChangeTimeout bounds the wait for every ACK of one change.
	ChangeTimeout time.Duration
	// ReadyTimeout bounds the control plane's start (list and first views).
	ReadyTimeout time.Duration
	// CPUProfile and MemProfile, when set on path fake, are written by the
	// control plane over the change phase (CPU) and after it (heap).
	CPUProfile, MemProfile string
	// SyncCPUProfile and SyncMemProfile, when set on path fake, profile the
	// initial sync: CPU while the agents connect, heap as soon as the last
	// agent has its first view (before the control plane quiesces), which
	// is where the peak RSS is.
	SyncCPUProfile, SyncMemProfile string
	// Decode makes agents fully decode and cross-check every response.
	Decode bool
}

// Env is what runs share: binaries, a work directory and, for path a, a
// running API server already holding the cluster.
type Env struct {
	Bins    Binaries
	WorkDir string
	API     *apiserver.Server
	Log     *slog.Logger
}

// RunFanout runs the control plane with len(c.Nodes) simulated agents over
// cluster c, applies o.Changes changes one at a time and measures each.
// c must already be loaded into env.API on path a; c.next advances.
func RunFanout(ctx context.Context, env *Env, c *LoadedCluster, o FanoutOptions) (Record, error) {
	rec := Record{
		Kind: "fanout", Path: o.Path, Mode: string(o.Mode), Agents: c.Shape.Nodes,
		Services: c.Shape.Services, Endpoints: c.Shape.Endpoints, Started: time.Now(), LoadAvg: loadAvg(),
		CoalesceMS: ms(o.Coalesce), ApplyDelayMS: ms(o.ApplyDelay), Changes: o.Changes,
	}
	tag := fmt.Sprintf("%s-%s-n%d-%dx%d", o.Path, o.Mode, c.Shape.Nodes, c.Shape.Services, c.Shape.Endpoints)
	cp, fd, err := startControlPlane(ctx, env, c, o, tag)
	if err != nil {
		return rec, err
	}
	defer func() { _ = cp.stop() }()

	fleet := agentsim.NewFleet(agentsim.Config{
		Target: cp.grpc, Mode: o.Mode, ApplyDelay: o.ApplyDelay, Decode: o.Decode,
	}, c.NodeNames())
	actx, stopAgents := context.WithCancel(ctx)
	defer func() { stopAgents(); fleet.Stop() }()

	if err := profile(ctx, cp, "/profile/cpu/start", o.SyncCPUProfile); err != nil {
		return rec, err
	}
	begin := time.Now()
	n := c.Shape.Nodes
	if err := initialSync(ctx, actx, fleet, n, o); err != nil {
		return rec, err
	}
	rec.InitialSyncMS = ms(time.Since(begin))
	if err := profile(ctx, cp, "/profile/cpu/stop", o.SyncCPUProfile); err != nil {
		return rec, err
	}
	if err := profile(ctx, cp, "/profile/heap", o.SyncMemProfile); err != nil {
		return rec, err
	}
	initBytes, _ := fleet.Bytes()
	rec.InitialBytesPerAgent = initBytes / int64(n)
	cpuSynced, err := procstat.CPU(cp.Pid())
	if err != nil {
		return rec, err
	}
	rec.CPUInitialSec = cpuSynced.Seconds()
	// The initial sync leaves garbage and flushing behind; changes start
	// once the control plane is idle, so they do not pay for it.
	cpu0, err := quiesce(ctx, cp.Pid())
	if err != nil {
		return rec, err
	}
	m, err := procstat.Mem(cp.Pid())
	if err != nil {
		return rec, err
	}
	rec.PeakRSS = m.Peak
	if err := procstat.ResetPeak(cp.Pid()); err != nil {
		env.Log.Warn("cannot reset peak RSS; change-phase peak is the lifetime peak", "err", err)
	}

	if err := profile(ctx, cp, "/profile/cpu/start", o.CPUProfile); err != nil {
		return rec, err
	}
	lat, allAcked, bytesPer, respPer, err := runChanges(ctx, c, fd, fleet, o)
	if err != nil {
		return rec, err
	}
	if err := profile(ctx, cp, "/profile/cpu/stop", o.CPUProfile); err != nil {
		return rec, err
	}
	cpu1, err := procstat.CPU(cp.Pid())
	if err != nil {
		return rec, err
	}
	if m, err = procstat.Mem(cp.Pid()); err != nil {
		return rec, err
	}
	rec.ChangePeakRSS = m.Peak
	if rec.HeapInuse, err = cp.heapInuse(ctx); err != nil {
		return rec, err
	}
	if err := profile(ctx, cp, "/profile/heap", o.MemProfile); err != nil {
		return rec, err
	}
	rec.summarize(lat, allAcked, bytesPer, respPer)
	rec.CPUPerChangeSec = (cpu1 - cpu0).Seconds() / float64(o.Changes)
	if self, err := procstat.Mem(os.Getpid()); err == nil {
		rec.HarnessPeakRSS = self.Peak
	}
	return rec, nil
}

// summarize fills the per-change fields from the raw samples.
func (rec *Record) summarize(lat, allAcked []time.Duration, bytesPer, respPer []int64) {
	slices.Sort(lat)
	rec.LatencyP50MS, rec.LatencyP99MS = ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99))
	rec.LatencyMaxMS = ms(lat[len(lat)-1])
	rec.AllAckedMS = ms(median(allAcked))
	rec.BytesPerChange = median(bytesPer)
	rec.BytesPerAgentChange = float64(rec.BytesPerChange) / float64(rec.Agents)
	rec.ResponsesPerChange = float64(median(respPer))
}

// initialSync connects the agents in waves of o.Wave; each wave waits for
// every agent's first view before the next dials. Agents run under actx.
func initialSync(ctx, actx context.Context, fleet *agentsim.Fleet, n int, o FanoutOptions) error {
	for from := 0; from < n; from += o.Wave {
		to := min(from+o.Wave, n)
		if err := fleet.Start(actx, from, to); err != nil {
			return err
		}
		base := make([]int, n)
		for i := range base {
			if i < from || i >= to {
				base[i] = -1
			}
		}
		wctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
		err := fleet.Wait(wctx, base)
		cancel()
		if err != nil {
			return fmt.Errorf("initial sync of agents %d-%d: %w", from, to, err)
		}
	}
	return nil
}

// runChanges applies the changes one at a time; each waits for every
// agent's ACK before the next is written.
func runChanges(ctx context.Context, c *LoadedCluster, fd feed, fleet *agentsim.Fleet, o FanoutOptions) (
	lat, allAcked []time.Duration, bytesPer, respPer []int64, err error,
) {
	agents := fleet.Agents()
	for range o.Changes {
		base := fleet.Counts()
		b0, r0 := fleet.Bytes()
		change := c.Change(c.next)
		c.next++
		t0 := time.Now()
		if err := fd.apply(ctx, change); err != nil {
			return nil, nil, nil, nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, o.ChangeTimeout)
		err := fleet.Wait(wctx, base)
		cancel()
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("change %d: %w", c.next-1, err)
		}
		var last time.Duration
		for i, a := range agents {
			d := a.Batch(base[i]).Acked.Sub(t0)
			lat = append(lat, d)
			last = max(last, d)
		}
		allAcked = append(allAcked, last)
		b1, r1 := fleet.Bytes()
		bytesPer, respPer = append(bytesPer, b1-b0), append(respPer, r1-r0)
	}
	return lat, allAcked, bytesPer, respPer, nil
}

// quiesce waits until pid used under 5% of a CPU over half a second (at
// most 30 s) and returns its CPU time then.
func quiesce(ctx context.Context, pid int) (time.Duration, error) {
	const window = 500 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	prev, err := procstat.CPU(pid)
	for err == nil {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(window):
		}
		var cur time.Duration
		if cur, err = procstat.CPU(pid); err != nil {
			break
		}
		if cur-prev < window/20 || time.Now().After(deadline) {
			return cur, nil
		}
		prev = cur
	}
	return 0, err
}

// profile drives the benchcp profile endpoints; nothing when file is empty
// or the control plane is the real binary.
func profile(ctx context.Context, cp *process, path, file string) error {
	if file == "" || cp.control == "" {
		return nil
	}
	if strings.HasSuffix(path, "/stop") {
		return cp.post(ctx, path, nil)
	}
	return cp.post(ctx, path+"?path="+url.QueryEscape(file), nil)
}

// startControlPlane starts the process of o.Path and returns it with the
// feed that writes changes to it.
func startControlPlane(ctx context.Context, env *Env, c *LoadedCluster, o FanoutOptions, tag string) (*process, feed, error) {
	common := []string{"--coalesce-window", o.Coalesce.String(), "--log-level", "warn"}
	logPath := filepath.Join(env.WorkDir, "cp-"+tag+".log")
	switch o.Path {
	case PathAPIServer:
		if env.API == nil || c.client == nil {
			return nil, nil, errors.New("path apiserver needs a running API server holding the cluster")
		}
		args := append([]string{"--kubeconfig", env.API.KubeconfigPath(), "--insecure", "--id", "cp-bench"}, common...)
		p, err := startProcess(ctx, env.Bins.ControlPlane, args, logPath, false, o.ReadyTimeout)
		return p, apiFeed{c.client}, err
	case PathFake:
		objs, err := c.Objects()
		if err != nil {
			return nil, nil, err
		}
		file := filepath.Join(env.WorkDir, "objects-"+tag+".json")
		if err := writeJSON(file, objs); err != nil {
			return nil, nil, err
		}
		defer os.Remove(file)
		args := append([]string{"--objects", file}, common...)
		p, err := startProcess(ctx, env.Bins.BenchCP, args, logPath, true, o.ReadyTimeout)
		return p, fakeFeed{p: p, c: c}, err
	}
	return nil, nil, fmt.Errorf("unknown path %q", o.Path)
}

func writeJSON(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(v); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// feed writes one change to the control plane's source.
type feed interface {
	apply(ctx context.Context, s tbslices.Slice) error
}

// apiFeed updates the slice in kube-apiserver (a Get of the Service, a Get
// and an Update of the slice, as e2e/testbed/slices does).
type apiFeed struct{ c *tbslices.Client }

func (f apiFeed) apply(ctx context.Context, s tbslices.Slice) error {
	_, err := f.c.Update(ctx, s)
	return err
}

// fakeFeed posts the built slice to the benchcp control API.
type fakeFeed struct {
	p *process
	c *LoadedCluster
}

func (f fakeFeed) apply(ctx context.Context, s tbslices.Slice) error {
	es, err := tbslices.Build(f.c.identity(s.Service), s, time.Now())
	if err != nil {
		return err
	}
	body, err := json.Marshal(es)
	if err != nil {
		return err
	}
	return f.p.post(ctx, "/apply", body)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
