package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
)

var sysctlKey = regexp.MustCompile(`^[a-z0-9_-]+(\.[a-z0-9_-]+)+$`)

// SetSysctls writes sysctls inside namespace ns (from a thread that entered
// it, so /proc/sys/net resolves to ns) and reads each one back.
func (t *Topology) SetSysctls(ns string, sysctls ...Sysctl) error {
	for _, s := range sysctls {
		if !sysctlKey.MatchString(s.Key) {
			return fmt.Errorf("invalid sysctl key %q", s.Key)
		}
	}
	return t.Do(ns, func() error {
		for _, s := range sysctls {
			if err := writeSysctl(s); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadSysctl reads one sysctl inside namespace ns.
func (t *Topology) ReadSysctl(ns, key string) (string, error) {
	if !sysctlKey.MatchString(key) {
		return "", fmt.Errorf("invalid sysctl key %q", key)
	}
	var v string
	err := t.Do(ns, func() error {
		b, err := os.ReadFile(sysctlPath(key))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

func writeSysctl(s Sysctl) error {
	path := sysctlPath(s.Key)
	if err := os.WriteFile(path, []byte(s.Value), 0); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", s.Key, s.Value, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sysctl %s: read back: %w", s.Key, err)
	}
	if got := strings.TrimSpace(string(b)); got != s.Value {
		return fmt.Errorf("sysctl %s: wrote %q, reads %q", s.Key, s.Value, got)
	}
	return nil
}

func sysctlPath(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// applySysctls sets the planned sysctls. Bridge netfilter settings are
// skipped with a warning when the kernel has no br_netfilter.
func (t *Topology) applySysctls() error {
	type target struct {
		ns      string
		sysctls []Sysctl
	}
	targets := []target{{t.plan.Network.NS, t.plan.Network.Sysctls}}
	for _, n := range t.plan.Nodes {
		targets = append(targets, target{n.NS, n.Sysctls})
	}
	for _, tg := range targets {
		for _, s := range tg.sysctls {
			err := t.SetSysctls(tg.ns, s)
			if errors.Is(err, fs.ErrNotExist) && strings.HasPrefix(s.Key, "net.bridge.") {
				t.log.Warn("kernel has no bridge netfilter; skipping", "ns", tg.ns, "key", s.Key)
				continue
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}
