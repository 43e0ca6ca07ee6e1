package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/latency"
)

// beds brings up one bed per measurement, with the images built once.
type beds struct {
	log     *slog.Logger
	cfg     config
	base    cluster.Config
	kpImage string
}

func newBeds(ctx context.Context, log *slog.Logger, c config) (*beds, error) {
	b := &beds{log: log, cfg: c}
	b.base = cluster.Config{Nodes: c.nodes, KeepDir: c.keepDir, Logger: log}
	archives, err := cluster.BuildImages(ctx, b.base)
	if err != nil {
		return nil, err
	}
	b.base = cluster.WithImages(b.base, archives)
	if slices.ContainsFunc(c.proxies, func(p cluster.Proxy) bool { return p.Kind == cluster.KindKubeProxy }) {
		a, err := cluster.BuildKubeProxyImage(ctx, b.base)
		if err != nil {
			return nil, fmt.Errorf("kube-proxy image (make testbed builds kube-proxy): %w", err)
		}
		b.kpImage = a.Path
	}
	return b, nil
}

// measure brings up a bed for p, installs it, measures and tears down.
func (b *beds) measure(ctx context.Context, p cluster.Proxy, run int) (rec latency.Record, err error) {
	begin := time.Now()
	c, err := cluster.UpWithProxy(ctx, b.base, p, b.cfg.overlay, b.kpImage)
	if err != nil {
		return rec, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, c.Down(dctx))
	}()
	ready := time.Since(begin)
	b.log.Info("bed ready", "proxy", p.Name, "run", run, "after", ready.Round(time.Millisecond))
	o := b.cfg.measure
	o.Proxy, o.Run, o.Logger = p, run, b.log
	rec, err = latency.Measure(ctx, c, o)
	rec.BedSeconds = ready.Round(time.Millisecond).Seconds()
	return rec, err
}
