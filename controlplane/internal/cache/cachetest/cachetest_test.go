package cachetest_test

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
)

func TestVersionsAreContentHashes(t *testing.T) {
	a1 := cachetest.MustView(t, cachetest.Service("ns", "a", "10.96.0.1", 80))
	a2 := cachetest.MustView(t, cachetest.Service("ns", "a", "10.96.0.1", 80))
	a3 := cachetest.MustView(t, cachetest.Service("ns", "a", "10.96.0.2", 80))
	b := cachetest.MustView(t, cachetest.Service("ns", "b", "10.96.0.3", 80))

	if a1.Version != a2.Version {
		t.Errorf("same content, versions %q and %q differ", a1.Version, a2.Version)
	}
	if a1.Version == a3.Version {
		t.Errorf("different content, same version %q", a1.Version)
	}
	if string(a1.Bytes) != string(a2.Bytes) {
		t.Error("same content encodes differently")
	}
	v1 := cachetest.NewNodeView(a1, b)
	v2 := cachetest.NewNodeView(b, a2)
	if v1.Version() != v2.Version() {
		t.Errorf("same views, system versions %q and %q differ", v1.Version(), v2.Version())
	}
	if v3 := cachetest.NewNodeView(a3, b); v3.Version() == v1.Version() {
		t.Error("different views share a system version")
	}
	if empty := cachetest.NewNodeView(); empty.Version() == v1.Version() || empty.Version() == "" {
		t.Errorf("empty view version %q", empty.Version())
	}
}

func TestWithMatchesRebuild(t *testing.T) {
	base := cachetest.NewNodeView(cachetest.Services(t, "ns", 5, 0)...)
	repl := cachetest.Services(t, "ns", 2, 1)
	added := cachetest.MustView(t, cachetest.Service("ns", "zzz", "10.96.9.9", 53))
	tests := []struct {
		name string
		got  *cachetest.NodeView
		want *cachetest.NodeView
	}{
		{name: "replace", got: base.With(repl...), want: cachetest.NewNodeView(append(cachetest.Services(t, "ns", 5, 0)[2:], repl...)...)},
		{name: "add", got: base.With(added), want: cachetest.NewNodeView(append(cachetest.Services(t, "ns", 5, 0), added)...)},
		{name: "remove", got: base.Without("ns/svc-001"), want: cachetest.NewNodeView(append(cachetest.Services(t, "ns", 5, 0)[:1], cachetest.Services(t, "ns", 5, 0)[2:]...)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.Version() != tt.want.Version() || tt.got.Len() != tt.want.Len() {
				t.Errorf("got %s (%d views), want %s (%d views)", tt.got.Version(), tt.got.Len(), tt.want.Version(), tt.want.Len())
			}
		})
	}
}
