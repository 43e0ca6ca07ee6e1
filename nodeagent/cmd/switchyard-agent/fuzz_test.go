package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzConfigFile feeds arbitrary --config files to the agent's loader: it
// must never panic, and a file it accepts must give a configuration that
// validates and that the same file loads the same way again (no state
// leaks between loads).
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		"controlPlanes: [cp:18000]\nnodeName: node-a\nmode: nftables\ninsecure: true\n",
		"controlPlanes: [unix:///run/cp.sock]\nnodeName: n\nsyncPeriod: 1h\nminSyncPeriod: 1s\ninsecure: true\nlogLevel: debug\n",
		"mode: ipvs\ngcPercent: 50\n",
		"controlPlanes: [cp:18000]\nnodeName: n\ninsecure: true\ndatapathCanary: 10.96.255.200:80\ndatapathCanaryPort: 10264\ndatapathProbeInterval: 2s\n",
		"datapathCanary: \"[fd00:96::c8]:80\"\ndatapathProbeInterval: 0s\n",
		"datapathCanaryPort: 0\n",
		"syncPeriod: -1s\n",
		"unknownField: 1\n",
		"{",
		"",
	} {
		f.Add([]byte(seed))
	}
	matches, _ := filepath.Glob("testdata/*.yaml")
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
	path := filepath.Join(f.TempDir(), "config.yaml")
	env := func(string) string { return "" }
	f.Fuzz(func(t *testing.T, file []byte) {
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := parseConfig([]string{"--config", path}, io.Discard, env)
		if err != nil {
			return // a clear error is the right answer to a bad file
		}
		if err := c.validate(); err != nil {
			t.Fatalf("accepted a configuration that does not validate: %v", err)
		}
		again, err := parseConfig([]string{"--config", path}, io.Discard, env)
		if err != nil {
			t.Fatalf("the same file loads the second time with %v", err)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("two loads of one file differ:\n%+v\n%+v", c, again)
		}
	})
}
