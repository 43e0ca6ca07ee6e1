package main

import (
	"context"

	"github.com/switchyard-proxy/switchyard/e2e/bench"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
)

// apiload measures the watches on kube-apiserver for each setup.
func (h *harness) apiload(ctx context.Context) error {
	if err := apiserver.Available(); err != nil {
		h.log.Warn("API-load suite skipped", "err", err)
		return nil
	}
	o := h.o.load
	var err error
	if o.Agents, err = ints(h.o.loadAgents); err != nil {
		return err
	}
	return bench.RunAPILoad(ctx, h.env, o, h.save)
}
