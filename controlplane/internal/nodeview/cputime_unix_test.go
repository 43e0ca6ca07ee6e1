//go:build unix

package nodeview

import "syscall"

// cpuTime returns the process's user plus system CPU time in nanoseconds,
// or -1 when unavailable. Benchmarks report it beside wall time because
// wall time on a shared machine measures the machine's load as much as
// the code.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
