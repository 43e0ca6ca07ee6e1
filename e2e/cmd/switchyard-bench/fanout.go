package main

import (
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/e2e/bench"
	"github.com/switchyard-proxy/switchyard/e2e/bench/agentsim"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// fanout runs every configuration: per path, size and agent count, reps
// rounds of every mode (modes interleaved, so drift in machine load hits
// them alike).
func (h *harness) fanout(ctx context.Context) error {
	szs, err := sizes(h.o.sizes)
	if err != nil {
		return err
	}
	for _, path := range split(h.o.paths) {
		if path == bench.PathAPIServer {
			if err := apiserver.Available(); err != nil {
				h.log.Warn("path apiserver skipped", "err", err)
				continue
			}
		}
		counts := h.o.agents
		if path == bench.PathAPIServer {
			counts = h.o.apiAgents
		}
		ns, err := ints(counts)
		if err != nil {
			return err
		}
		for _, sz := range szs {
			for _, n := range ns {
				shape := bench.Shape{Nodes: n, Services: sz[0], Endpoints: sz[1]}
				if err := h.fanoutShape(ctx, path, shape); err != nil {
					return fmt.Errorf("%s %v: %w", path, shape, err)
				}
			}
		}
	}
	return nil
}

func (h *harness) fanoutShape(ctx context.Context, path string, shape bench.Shape) error {
	c := bench.Generate(shape)
	var cluster *bench.LoadedCluster
	switch path {
	case bench.PathFake:
		cluster = bench.NewLoaded(c)
	case bench.PathAPIServer:
		srv, err := apiserver.StartContext(ctx, apiserver.NewConfig(apiserver.WithLogger(h.log)))
		if err != nil {
			return err
		}
		defer func() { _ = srv.Stop() }()
		h.env.API = srv
		defer func() { h.env.API = nil }()
		h.log.Info("loading the API server", "shape", shape.String())
		if cluster, err = bench.LoadAPI(ctx, srv, c, 16); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown path %q", path)
	}
	for rep := range h.o.reps {
		for _, mode := range split(h.o.modes) {
			o := h.o.fan
			o.Path, o.Mode = path, agentsim.Mode(mode)
			if o.Mode == agentsim.SotW && h.o.sotwChanges > 0 {
				o.Changes = h.o.sotwChanges
			}
			o.CPUProfile, o.MemProfile, o.SyncCPUProfile, o.SyncMemProfile = "", "", "", ""
			if path == bench.PathFake && shape.Nodes == h.o.profileAgents && rep == 0 {
				tag := fmt.Sprintf("%s-n%d-%dx%d", mode, shape.Nodes, shape.Services, shape.Endpoints)
				o.CPUProfile, o.MemProfile = profileFile(h.o.fan.CPUProfile, tag), profileFile(h.o.fan.MemProfile, tag)
				o.SyncCPUProfile = profileFile(h.o.fan.SyncCPUProfile, tag)
				o.SyncMemProfile = profileFile(h.o.fan.SyncMemProfile, tag)
			}
			h.log.Info("fan-out run", "path", path, "mode", mode, "shape", shape.String(), "rep", rep)
			rec, err := bench.RunFanout(ctx, h.env, cluster, o)
			if err != nil {
				return fmt.Errorf("%s rep %d: %w", mode, rep, err)
			}
			rec.Rep = rep
			h.log.Info("fan-out result", "path", path, "mode", mode, "shape", shape.String(),
				"p50ms", rec.LatencyP50MS, "p99ms", rec.LatencyP99MS, "allAckedMs", rec.AllAckedMS,
				"bytesPerChange", rec.BytesPerChange, "cpuMsPerChange", rec.CPUPerChangeSec*1000,
				"peakRssMiB", rec.PeakRSS>>20, "initialSyncMs", rec.InitialSyncMS)
			if err := h.save(rec); err != nil {
				return err
			}
		}
	}
	return nil
}
