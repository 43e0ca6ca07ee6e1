package traffic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RateResult is a closed-loop run of new connections.
type RateResult struct {
	Workers     int     `json:"workers"`
	Seconds     float64 `json:"seconds"`
	Connections int64   `json:"connections"`
	Failed      int64   `json:"failed,omitempty"`
	Error       string  `json:"error,omitempty"` // the first failure
	PerSecond   float64 `json:"perSecond"`
	// CPUMicrosPerConn is the machine's busy CPU time over the run
	// (/proc/stat: everything but idle and iowait, every CPU) divided by
	// the connections: client, node and sink together, plus whatever else
	// ran; 0 when /proc/stat is unreadable.
	CPUMicrosPerConn float64 `json:"cpuMicrosPerConn,omitempty"`
}

// Rate runs workers loops in ns for d, each making short connections to
// targets in turn (connect, half-close, the sink's answer, reset), and
// counts them.
func Rate(ctx context.Context, n Namespaces, ns string, targets []netip.AddrPort, workers int, d, timeout time.Duration) (RateResult, error) {
	if len(targets) == 0 || workers <= 0 {
		return RateResult{}, errors.New("rate: no targets or no workers")
	}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	errs := make([]error, workers)
	busy0, cpuErr := busyCPU()
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			errs[w] = n.Do(ns, func() error {
				for i := w; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
					if err := transactOnce(targets[i%len(targets)], timeout); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					ok.Add(1)
				}
				return nil
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	busy1, cpuErr1 := busyCPU()
	if err := errors.Join(errs...); err != nil {
		return RateResult{}, err
	}
	r := RateResult{Workers: workers, Seconds: elapsed.Seconds(), Connections: ok.Load(), Failed: failed.Load()}
	if s, _ := firstErr.Load().(string); s != "" {
		r.Error = s
	}
	r.PerSecond = float64(r.Connections) / elapsed.Seconds()
	if cpuErr == nil && cpuErr1 == nil && r.Connections > 0 {
		r.CPUMicrosPerConn = micros(busy1-busy0) / float64(r.Connections)
	}
	return r, nil
}

// clockTick is USER_HZ, the unit of /proc/stat: 100 on every Linux
// architecture this runs on.
const clockTick = 10 * time.Millisecond

// busyCPU is the machine's busy CPU time so far: the first line of
// /proc/stat without idle and iowait.
func busyCPU() (time.Duration, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, fmt.Errorf("/proc/stat: empty: %w", sc.Err())
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 8 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected %q", sc.Text())
	}
	var busy int64
	for i, f := range fields[1:] {
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest time is already in user
			continue
		}
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += v
	}
	return time.Duration(busy) * clockTick, nil
}
