package apiserver

import (
	"log/slog"
	"strings"
	"testing"
)

// Start runs a server for the duration of t: it calls Require, starts etcd
// and kube-apiserver, logs start-up time and RSS, and registers a cleanup
// that prints the log tails if t failed and then stops everything.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	Require(t)
	logger := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	cfg := NewConfig(append([]Option{WithLogger(logger)}, opts...)...)
	s, err := StartContext(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(strings.TrimPrefix(s.logTails(), "\n"))
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop test bed API server: %v", err)
		}
	})
	t.Logf("test bed API server at %s: %v", s.URL(), s.Stats())
	return s
}

// tWriter lets a slog handler write to t.Log, one record per call.
type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// dropTime removes the time attribute; t.Log output is already ordered.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
