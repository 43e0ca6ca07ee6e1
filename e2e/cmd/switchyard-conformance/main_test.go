package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/conformance"
)

// TestDefaultProxies: every proxy of the default matrix is one the bed runs.
func TestDefaultProxies(t *testing.T) {
	for _, p := range defaultProxies {
		if _, err := cluster.ParseProxy(p); err != nil {
			t.Errorf("default proxy: %v", err)
		}
	}
}

// TestParseFlags: -dual-stack switches the skip table and the results
// directory unless -skip or -out say otherwise; without it nothing moves.
func TestParseFlags(t *testing.T) {
	v4, ds := conformance.SkipRegexp(conformance.BedSkips()), conformance.SkipRegexp(conformance.DualStackBedSkips())
	results := filepath.Join("/repo", "conformance", "results")
	tests := []struct {
		name      string
		args      []string
		skip, out string
		dualStack bool
	}{
		{"defaults", nil, v4, results, false},
		{"dual-stack", []string{"-dual-stack"}, ds, filepath.Join(results, "dualstack"), true},
		{"dual-stack, own skip and out", []string{"-dual-stack", "-skip", "SCTP", "-out", "/o"}, "SCTP", "/o", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseFlags("/repo", tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if c.skip != tt.skip || c.out != tt.out || c.dualStack != tt.dualStack {
				t.Errorf("parseFlags(%q) = skip %q, out %q, dualStack %v; want %q, %q, %v",
					tt.args, c.skip, c.out, c.dualStack, tt.skip, tt.out, tt.dualStack)
			}
		})
	}
	if _, err := parseFlags("/repo", []string{"extra"}); err == nil {
		t.Error("parseFlags accepted a stray argument")
	}
}

func TestRunCommand(t *testing.T) {
	tests := []struct {
		name string
		r    conformance.Results
		want string
	}{
		{"defaults", conformance.Results{Proxy: "switchyard-nftables", Focus: `\[sig-network\]`,
			Skip: conformance.SkipRegexp(conformance.BedSkips()), Versions: map[string]string{"nodes": "6", "parallel": "3"}},
			`go run ./e2e/cmd/switchyard-conformance -proxies switchyard-nftables -focus '\[sig-network\]'`},
		{"other nodes and skip", conformance.Results{Proxy: "kube-proxy-iptables", Focus: `it's`, Skip: "SCTP",
			Versions: map[string]string{"nodes": "2"}},
			`go run ./e2e/cmd/switchyard-conformance -proxies kube-proxy-iptables -focus 'it'\''s' -nodes 2 -parallel 1 -skip 'SCTP'`},
		{"dual-stack with its default skips", conformance.Results{Proxy: "switchyard-iptables", Focus: `\[sig-network\]`,
			Skip: conformance.SkipRegexp(conformance.DualStackBedSkips()), Versions: map[string]string{"nodes": "6", "parallel": "3", "dualStack": "true"}},
			`go run ./e2e/cmd/switchyard-conformance -proxies switchyard-iptables -focus '\[sig-network\]' -dual-stack`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runCommand(tt.r); got != tt.want {
				t.Errorf("runCommand = %s\nwant          %s", got, tt.want)
			}
		})
	}
}

// TestReport writes a results file twice and checks that the second
// report prints what changed.
func TestReport(t *testing.T) {
	var out strings.Builder
	h := &harness{out: &out, cfg: config{out: t.TempDir()}}
	first := conformance.Results{Proxy: "switchyard-nftables", Date: "2026-12-01", Specs: map[string]conformance.Spec{
		"a": {Outcome: conformance.Passed}, "b": {Outcome: conformance.Passed}}}
	if err := h.report(first, time.Second); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "changes since") {
		t.Errorf("first report printed changes:\n%s", out.String())
	}
	out.Reset()
	second := conformance.Results{Proxy: "switchyard-nftables", Date: "2026-12-02", Specs: map[string]conformance.Spec{
		"a": {Outcome: conformance.Passed}, "b": {Outcome: conformance.Failed, Reason: "failed: boom"}}}
	if err := h.report(second, time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAILED b: failed: boom", "changes since 2026-12-01 (1):", "b: passed → failed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	got, err := conformance.ReadResults(filepath.Join(h.cfg.out, "switchyard-nftables.json"))
	if err != nil || got.Date != "2026-12-02" {
		t.Errorf("results file: %+v, %v", got, err)
	}
}
