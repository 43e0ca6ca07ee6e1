package launch

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Memory is a process's resident set now (VmRSS) and at its peak (VmHWM),
// in bytes.
type Memory struct {
	RSS, Peak uint64
}

// ReadMemory reads VmRSS and VmHWM from /proc/PID/status.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Memory{}, fmt.Errorf("memory of pid %d: %w", pid, err)
	}
	m, err := parseMemory(b)
	if err != nil {
		return Memory{}, fmt.Errorf("memory of pid %d: %w", pid, err)
	}
	return m, nil
}

// RSS is the process's resident set size in bytes (VmRSS).
func RSS(pid int) (uint64, error) {
	m, err := ReadMemory(pid)
	return m.RSS, err
}

func parseMemory(status []byte) (Memory, error) {
	var m Memory
	for line := range bytes.Lines(status) {
		key, val, ok := strings.Cut(string(line), ":")
		var dst *uint64
		switch {
		case !ok:
			continue
		case key == "VmRSS":
			dst = &m.RSS
		case key == "VmHWM":
			dst = &m.Peak
		default:
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("parse %s: %q", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parse %s: %w", key, err)
		}
		*dst = kb << 10
	}
	if m.RSS == 0 || m.Peak == 0 {
		return Memory{}, errors.New("no VmRSS or VmHWM")
	}
	return m, nil
}
