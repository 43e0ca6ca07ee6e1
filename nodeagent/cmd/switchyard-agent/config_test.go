package main

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(file, []byte("controlPlanes: [cp-a:18000, cp-b:18000]\nmode: dry-run\nsyncPeriod: 1m\ninsecure: true\nstateDir: /from/file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	canaryFile := filepath.Join(dir, "canary.yaml")
	if err := os.WriteFile(canaryFile, []byte("controlPlanes: [a:1]\ninsecure: true\ndatapathCanary: \"[fd00:96::c8]:80\"\ndatapathCanaryPort: 10300\ndatapathProbeInterval: 5s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := defaults(env(map[string]string{"NODE_NAME": "node-env"}))
	tests := []struct {
		name string
		args []string
		want func(c *Config)
	}{
		{"flags only, repeated and comma-separated", []string{"--control-plane", "a:1,b:2", "--control-plane=c:3", "--insecure"}, func(c *Config) {
			c.ControlPlanes, c.Insecure = []string{"a:1", "b:2", "c:3"}, true
		}},
		{"file", []string{"--config", file}, func(c *Config) {
			c.ControlPlanes, c.Mode, c.SyncPeriod, c.Insecure, c.StateDir = []string{"cp-a:18000", "cp-b:18000"}, "dry-run", Duration{time.Minute}, true, "/from/file"
		}},
		{"flags override file", []string{"--config", file, "--control-plane", "x:1", "--sync-period", "5s", "--node-name", "node-flag"}, func(c *Config) {
			c.ControlPlanes, c.Mode, c.SyncPeriod, c.Insecure, c.StateDir, c.NodeName = []string{"x:1"}, "dry-run", Duration{5 * time.Second}, true, "/from/file", "node-flag"
		}},
		{"datapath canary, IPv6, in the file and by flags", []string{"--config", canaryFile, "--datapath-probe-interval", "1s"}, func(c *Config) {
			c.ControlPlanes, c.Insecure = []string{"a:1"}, true
			c.DatapathCanary, c.DatapathCanaryPort, c.DatapathProbeInterval = "[fd00:96::c8]:80", 10300, Duration{time.Second}
		}},
		{"--cleanup needs no control plane, node or TLS", []string{"--cleanup", "--state-dir", "/host/var/lib/switchyard-agent"}, func(c *Config) {
			c.Cleanup, c.StateDir = true, "/host/var/lib/switchyard-agent"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := base
			tt.want(&want)
			got, err := parseConfig(tt.args, &bytes.Buffer{}, env(map[string]string{"NODE_NAME": "node-env"}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no control plane", []string{"--insecure", "--node-name", "n"}, "--control-plane is required"},
		{"no node name", []string{"--insecure", "--control-plane", "a:1"}, "--node-name is required"},
		{"plaintext not asked", []string{"--control-plane", "a:1", "--node-name", "n"}, "--ca-file is required"},
		{"insecure with TLS", []string{"--control-plane", "a:1", "--node-name", "n", "--insecure", "--ca-file", "ca.pem"}, "cannot be combined"},
		{"cert without key", []string{"--control-plane", "a:1", "--node-name", "n", "--ca-file", "ca.pem", "--cert-file", "c.pem"}, "go together"},
		{"canary without a port", []string{"--insecure", "--control-plane", "a:1", "--node-name", "n", "--datapath-canary", "10.96.255.200"}, "--datapath-canary \"10.96.255.200\""},
		{"canary IPv6 without brackets", []string{"--insecure", "--control-plane", "a:1", "--node-name", "n", "--datapath-canary", "fd00::1:80"}, "want IP:PORT"},
		{"canary on loopback", []string{"--insecure", "--control-plane", "a:1", "--node-name", "n", "--datapath-canary", "127.0.0.1:80"}, "want a cluster IP"},
		{"canary port 0", []string{"--insecure", "--control-plane", "a:1", "--node-name", "n", "--datapath-canary", "10.96.255.200:0"}, "want a cluster IP"},
		{"canary listen port out of range", []string{"--insecure", "--control-plane", "a:1", "--node-name", "n", "--datapath-canary-port", "70000"}, "--datapath-canary-port 70000"},
		{"negative probe interval", []string{"--insecure", "--control-plane", "a:1", "--node-name", "n", "--datapath-probe-interval", "-1s"}, "--datapath-probe-interval must not be negative"},
		{"unknown field in file", []string{"--config", "testdata/unknown.yaml"}, "unknown field"},
		// A DaemonSet's config saying cleanup would remove the rules and
		// exit on every start.
		{"cleanup is a flag only", []string{"--config", "testdata/cleanup.yaml"}, "unknown field \"cleanup\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig(tt.args, &bytes.Buffer{}, env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestHelpShowsDefaults; readme_test.go checks that every flag of --help
// is in the READMEs.
func TestHelpShowsDefaults(t *testing.T) {
	var out bytes.Buffer
	_, err := parseConfig([]string{"--help"}, &out, env(nil))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(out.String(), "0.0.0.0:10256") || !strings.Contains(out.String(), "127.0.0.1:10249") {
		t.Errorf("--help lacks the default bind addresses:\n%s", out.String())
	}
}

// TestModesBuild checks every mode is wired. Building one must not touch
// the kernel (this test runs in the machine's own namespace): iptables
// detects its flavour on the first Apply, never called here, and ipvs only
// asks the kernel whether it has IPVS (this machine's has not).
func TestModesBuild(t *testing.T) {
	newDP := dataplanes(t.Context(), &bytes.Buffer{}, slog.New(slog.DiscardHandler))
	for _, name := range []string{"iptables", "nftables", "userspace", "dry-run", "ipvs"} {
		t.Run(name, func(t *testing.T) {
			m, err := parseMode(name)
			if err != nil {
				t.Fatal(err)
			}
			dp, err := newDP(m)
			if name == "ipvs" && ipvs.IsIPVSUnavailable(err) {
				// --cleanup and the clean-up after a start skip it by this.
				if !errors.Is(err, dataplane.ErrUnavailable) {
					t.Errorf("%v is not dataplane.ErrUnavailable", err)
				}
				t.Logf("kernel without IPVS refused clearly: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if dp.Mode() != name {
				t.Errorf("mode = %q, want %q", dp.Mode(), name)
			}
			if again, _ := newDP(m); again != dp {
				t.Error("a second build made a new dataplane")
			}
		})
	}
	if _, err := parseMode("bogus"); err == nil {
		t.Error("bogus mode accepted")
	}
}
