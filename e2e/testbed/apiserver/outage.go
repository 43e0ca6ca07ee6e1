package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// KillAPIServer ends kube-apiserver alone with SIGKILL, an outage as a
// crashed or unreachable API server gives it: etcd keeps the data, and
// clients get connection refused until RestartAPIServer.
func (s *Server) KillAPIServer() error {
	p := s.apiserver
	if p == nil {
		return errors.New("kube-apiserver is not running")
	}
	if done, _ := p.exited(); !done {
		if err := killGroup(p.pid(), syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill kube-apiserver: %w", err)
		}
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("kube-apiserver (pid %d) not reaped 30s after SIGKILL", p.pid())
	}
	s.apiserver = nil
	s.cfg.Logger.Info("test bed kube-apiserver killed", "pid", p.pid())
	return nil
}

// RestartAPIServer starts kube-apiserver again on the address, certificates
// and etcd it had, and waits for its /readyz.
func (s *Server) RestartAPIServer(ctx context.Context) error {
	if s.apiserver != nil {
		return errors.New("kube-apiserver is running")
	}
	u, err := url.Parse(s.url)
	if err != nil {
		return fmt.Errorf("parse API server URL: %w", err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("API server URL %s: %w", s.url, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	if err := s.startAPIServer(ctx, port); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w%s", err, s.logTails())
	}
	s.cfg.Logger.Info("test bed kube-apiserver restarted", "pid", s.apiserver.pid(), "ready", s.stats.APIServerReady)
	return nil
}
