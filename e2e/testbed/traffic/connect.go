package traffic

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Latency is the distribution of connect times over Samples successful
// connects, in microseconds.
type Latency struct {
	Samples int     `json:"samples"`
	Failed  int     `json:"failed,omitempty"`
	Error   string  `json:"error,omitempty"` // the first failure
	P50     float64 `json:"p50Micros"`
	P90     float64 `json:"p90Micros"`
	P99     float64 `json:"p99Micros"`
	Max     float64 `json:"maxMicros"`
}

// Connect makes count connects from ns, to targets in turn, one at a time,
// each bounded by timeout, and returns their distribution.
func Connect(n Namespaces, ns string, targets []netip.AddrPort, count int, timeout time.Duration) (Latency, error) {
	if len(targets) == 0 || count <= 0 {
		return Latency{}, errors.New("connect: no targets or no count")
	}
	var lat Latency
	times := make([]time.Duration, 0, count)
	err := n.Do(ns, func() error {
		for i := range count {
			d, err := connectOnce(targets[i%len(targets)], timeout)
			if err != nil {
				if lat.Failed++; lat.Error == "" {
					lat.Error = err.Error()
				}
				continue
			}
			times = append(times, d)
		}
		return nil
	})
	if err != nil {
		return lat, err
	}
	lat.Samples = len(times)
	slices.Sort(times)
	lat.P50, lat.P90, lat.P99 = micros(quantile(times, 0.50)), micros(quantile(times, 0.90)), micros(quantile(times, 0.99))
	if len(times) > 0 {
		lat.Max = micros(times[len(times)-1])
	}
	return lat, nil
}

// connectOnce times one connect to t and resets the connection.
func connectOnce(t netip.AddrPort, timeout time.Duration) (time.Duration, error) {
	fd, d, err := dial(t, timeout)
	if err != nil {
		return 0, err
	}
	reset(fd)
	return d, nil
}

// transactOnce is one short connection end to end: connect, half-close,
// read the sink's answer (so a userspace proxy, which accepts before it
// reaches a backend, is timed through to the pod too), reset.
func transactOnce(t netip.AddrPort, timeout time.Duration) error {
	fd, _, err := dial(t, timeout)
	if err != nil {
		return err
	}
	defer reset(fd)
	if err := unix.Shutdown(fd, unix.SHUT_WR); err != nil {
		return fmt.Errorf("half-close to %s: %w", t, err)
	}
	var b [8]byte
	got := 0
	deadline := time.Now().Add(timeout)
	for got < len(b) {
		if err := wait(fd, unix.POLLIN, deadline); err != nil {
			return fmt.Errorf("answer from %s: %w", t, err)
		}
		n, err := unix.Read(fd, b[got:])
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		case err != nil:
			return fmt.Errorf("answer from %s: %w", t, err)
		case n == 0:
			return fmt.Errorf("answer from %s: EOF after %d bytes", t, got)
		default:
			got += n
		}
	}
	return nil
}

// dial connects a new socket to t and returns it with the time connect
// took. The socket is non-blocking and waited for with poll: a blocking
// connect with a timeout returns EINTR when the Go runtime's signals
// arrive.
func dial(t netip.AddrPort, timeout time.Duration) (int, time.Duration, error) {
	if !t.Addr().Is4() {
		return -1, 0, fmt.Errorf("connect %s: only IPv4", t)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, fmt.Errorf("socket: %w", err)
	}
	sa := &unix.SockaddrInet4{Port: int(t.Port()), Addr: t.Addr().As4()}
	start := time.Now()
	err = unix.Connect(fd, sa)
	if err == nil {
		return fd, time.Since(start), nil
	}
	if !errors.Is(err, unix.EINPROGRESS) {
		reset(fd)
		return -1, 0, fmt.Errorf("connect %s: %w", t, err)
	}
	if err := wait(fd, unix.POLLOUT, start.Add(timeout)); err != nil {
		reset(fd)
		return -1, 0, fmt.Errorf("connect %s: %w", t, err)
	}
	d := time.Since(start)
	soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soErr != 0 {
		err = unix.Errno(soErr)
	}
	if err != nil {
		reset(fd)
		return -1, 0, fmt.Errorf("connect %s: %w", t, err)
	}
	return fd, d, nil
}

// wait polls fd for events until deadline.
func wait(fd int, events int16, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return errors.New("timed out")
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		switch {
		case errors.Is(err, unix.EINTR) || (err == nil && n == 0):
		case err != nil:
			return fmt.Errorf("poll: %w", err)
		default:
			return nil
		}
	}
}

// reset closes fd with a reset instead of a FIN: no TIME_WAIT on the
// client, so long runs do not run out of ports.
func reset(fd int) {
	_ = unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0})
	_ = unix.Close(fd)
}

// quantile of sorted ts (nearest rank); 0 if empty.
func quantile(ts []time.Duration, q float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	i := int(q*float64(len(ts))+0.5) - 1
	return ts[min(max(i, 0), len(ts)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
