package system_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// The load a takeover runs under, all of it from the client through
// node-0, its gateway:
//   - new connections, takeoverRate a second to each target (the
//     ClusterIP and node-0's NodePort), each given less than the first
//     SYN retransmission (1 s): a dropped SYN is a failure here, not a
//     slow success;
//   - takeoverLongConns long-lived connections per target to echoing
//     pods, one request every takeoverEvery, each answer due within
//     takeoverReplyTimeout: their conntrack entries, made by kube-proxy's
//     rules, must outlive them;
//   - one UDP flow: one socket, so one 5-tuple and one conntrack entry,
//     one numbered datagram every takeoverEvery.
const (
	takeoverRate         = 50
	takeoverConnTimeout  = 900 * time.Millisecond
	takeoverLongConns    = 10
	takeoverEvery        = 100 * time.Millisecond
	takeoverReplyTimeout = time.Second
)

// loadTarget is an address the load reaches, named for reports; rate is
// its new connections a second (0: takeoverRate), timeout what each is
// given (0: takeoverConnTimeout) or, for a target of long-lived
// connections, what each answer is given (0: takeoverReplyTimeout).
type loadTarget struct {
	name    string
	addr    netip.AddrPort
	rate    int
	timeout time.Duration
}

// connRate is tg's new connections a second.
func (tg loadTarget) connRate() int { return cmp.Or(tg.rate, takeoverRate) }

// connTimeout is what each of tg's new connections is given.
func (tg loadTarget) connTimeout() time.Duration { return cmp.Or(tg.timeout, takeoverConnTimeout) }

// replyTimeout is what each answer on tg's long-lived connections is given.
func (tg loadTarget) replyTimeout() time.Duration { return cmp.Or(tg.timeout, takeoverReplyTimeout) }

// load is the running traffic; after stop its fields say what happened.
type load struct {
	start   time.Time
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	streams []*newConns
	long    []*longConn
	udp     *udpLog
	// lateUDP: check counts only the datagrams never answered, not late
	// answers (after the next tick). Under TCG the guest stalls for
	// hundreds of milliseconds at times (long-lived connections through
	// unchanged rules answer that late too).
	lateUDP bool
}

// newConns is one target's stream of new connections.
type newConns struct {
	loadTarget
	start time.Time
	res   probe.Result
	err   error
}

// longConn is one long-lived TCP connection; broke is set (since the
// load's start) with err when an exchange failed, and it is then
// abandoned.
type longConn struct {
	loadTarget
	conn      net.Conn
	rd        *bufio.Reader
	pod       string
	exchanges int
	maxRTT    time.Duration
	broke     time.Duration
	err       error
}

// udpLog is the UDP flow: every datagram sent, which were answered, the
// current (streak) and longest (maxRun) run of unanswered ones and the
// longest time between two answers; pods lists the pod answering, once
// per change. An answer that comes after the next tick is late: its
// datagram counts as unanswered, and leaves unanswered (never answered)
// when its echo is read later.
type udpLog struct {
	conn           net.Conn
	sent, answered int
	streak, maxRun int
	maxGap         time.Duration
	misses         []time.Duration // since the load's start
	pods           []string
	unanswered     map[int]bool // by sequence number
	late           int
}

// dial connects a socket created in the client's namespace.
func (e *env) dial(network string, addr netip.AddrPort) (net.Conn, error) {
	var conn net.Conn
	err := e.c.Topo.Do(e.c.Topo.Client().NS, func() error {
		var err error
		conn, err = net.DialTimeout(network, addr.String(), 2*time.Second)
		return err
	})
	return conn, err
}

// startLoad opens the long-lived connections and the UDP flow (failing t
// if one cannot start) and starts everything.
func (e *env) startLoad(t *testing.T, conns, long []loadTarget, udp netip.AddrPort) *load {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &load{cancel: cancel}
	t.Cleanup(l.stop)
	for _, tg := range long {
		for range takeoverLongConns {
			c, err := e.openLong(tg)
			if err != nil {
				t.Fatalf("long-lived connection to %s: %v", tg.name, err)
			}
			l.long = append(l.long, c)
		}
	}
	conn, err := e.dial("udp", udp)
	if err != nil {
		t.Fatalf("UDP flow to %s: %v", udp, err)
	}
	l.udp = &udpLog{conn: conn, unanswered: map[int]bool{}}
	l.start = time.Now()
	for _, tg := range conns {
		s := &newConns{loadTarget: tg, start: time.Now()}
		l.streams = append(l.streams, s)
		l.wg.Go(func() {
			s.res, s.err = probe.New(e.c.Topo, e.c.Topo.Client().NS).Stream(ctx, tg.addr,
				probe.StreamOptions{Rate: tg.connRate(), Timeout: tg.connTimeout()})
		})
	}
	for _, c := range l.long {
		l.wg.Go(func() { c.run(ctx, l.start) })
	}
	l.wg.Go(func() { l.udp.run(ctx, l.start) })
	return l
}

// stop ends the load and waits for it. Idempotent.
func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
	for _, c := range l.long {
		c.conn.Close()
	}
	if l.udp != nil {
		l.udp.conn.Close()
	}
}

// openLong connects to tg and reads the pod's greeting.
func (e *env) openLong(tg loadTarget) (*longConn, error) {
	conn, err := e.dial("tcp", tg.addr)
	if err != nil {
		return nil, err
	}
	c := &longConn{loadTarget: tg, conn: conn, rd: bufio.NewReader(conn)}
	_ = conn.SetDeadline(time.Now().Add(tg.replyTimeout()))
	line, err := c.rd.ReadString('\n')
	if err == nil {
		c.pod, _, err = echo.ParseReply([]byte(line))
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// run sends a numbered line every takeoverEvery and reads it back until
// ctx ends or an exchange fails.
func (c *longConn) run(ctx context.Context, start time.Time) {
	tick := time.NewTicker(takeoverEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		msg := fmt.Sprintf("request-%d\n", i)
		t0 := time.Now()
		err := c.conn.SetDeadline(t0.Add(c.replyTimeout()))
		if err == nil {
			_, err = io.WriteString(c.conn, msg)
		}
		var line string
		if err == nil {
			line, err = c.rd.ReadString('\n')
		}
		if err == nil && line != msg {
			err = fmt.Errorf("answer %q to %q", line, msg)
		}
		if err != nil {
			c.broke, c.err = max(time.Since(start), time.Nanosecond), err
			return
		}
		c.exchanges++
		c.maxRTT = max(c.maxRTT, time.Since(t0))
	}
}

// run sends "flow-<n>" every takeoverEvery and waits for its echo until
// the next tick; an answer to an earlier datagram is skipped.
func (u *udpLog) run(ctx context.Context, start time.Time) {
	tick := time.NewTicker(takeoverEvery)
	defer tick.Stop()
	last := time.Now()
	buf := make([]byte, 2048)
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		want := []byte(fmt.Sprintf("flow-%d", seq))
		u.sent++
		pod, ok := u.exchange(want, buf)
		if !ok {
			u.unanswered[seq] = true
			u.misses = append(u.misses, time.Since(start))
			u.streak++
			u.maxRun = max(u.maxRun, u.streak)
			continue
		}
		u.answered++
		u.streak = 0
		u.maxGap = max(u.maxGap, time.Since(last))
		last = time.Now()
		if len(u.pods) == 0 || u.pods[len(u.pods)-1] != pod {
			u.pods = append(u.pods, pod)
		}
	}
}

// exchange sends want and returns the pod that echoed it before the
// next tick is due.
func (u *udpLog) exchange(want, buf []byte) (string, bool) {
	if err := u.conn.SetDeadline(time.Now().Add(takeoverEvery * 9 / 10)); err != nil {
		return "", false
	}
	if _, err := u.conn.Write(want); err != nil {
		return "", false
	}
	for {
		n, err := u.conn.Read(buf)
		if err != nil {
			return "", false
		}
		// An echoing pod answers "<name>\n<payload>".
		head, payload, _ := bytes.Cut(buf[:n], []byte("\n"))
		if bytes.Equal(payload, want) {
			name, _, _ := echo.ParseReply(head)
			return name, true
		}
		var seq int
		if _, err := fmt.Sscanf(string(payload), "flow-%d", &seq); err == nil && u.unanswered[seq] {
			delete(u.unanswered, seq)
			u.late++
		}
	}
}

// phase is one stretch of a takeover, from its start to the next's.
type phase struct {
	name string
	from time.Time
}

// timeline is a takeover's phases in order.
type timeline []phase

func (tl *timeline) mark(name string) { *tl = append(*tl, phase{name: name, from: time.Now()}) }

// of returns the index of the phase at instant at (0 before the first).
func (tl timeline) of(at time.Time) int {
	i := 0
	for j, p := range tl {
		if !at.Before(p.from) {
			i = j
		}
	}
	return i
}

// failure is one failed connection, exchange or datagram, placed in time.
type failure struct {
	at   time.Time
	what string
}

// failures lists what failed during the load, each when it began: a
// timed-out attempt began its timeout before it ended.
func (l *load) failures() []failure {
	var out []failure
	for _, s := range l.streams {
		for _, f := range s.res.Failures {
			at := s.start.Add(f.At)
			if f.Reason == probe.ReasonTimeout {
				at = at.Add(-s.connTimeout())
			}
			out = append(out, failure{at, fmt.Sprintf("new connection to %s: %s: %v", s.name, f.Reason, f.Err)})
		}
	}
	for _, c := range l.long {
		if c.err != nil {
			out = append(out, failure{l.start.Add(c.broke), fmt.Sprintf("long-lived connection to %s (%s) broke: %v", c.name, c.pod, c.err)})
		}
	}
	for _, m := range l.udp.misses {
		out = append(out, failure{l.start.Add(m), "UDP datagram unanswered"})
	}
	return out
}

// summary is one line per target and kind of traffic.
func (l *load) summary() string {
	var b strings.Builder
	for _, s := range l.streams {
		fmt.Fprintf(&b, "new connections to %s: %d failed of %d (%v; sources the pods saw: %v)\n",
			s.name, len(s.res.Failures), s.res.Attempts, s.res, s.res.Clients)
	}
	broken, exchanges, rtt := 0, 0, time.Duration(0)
	for _, c := range l.long {
		exchanges += c.exchanges
		rtt = max(rtt, c.maxRTT)
		if c.err != nil {
			broken++
		}
	}
	fmt.Fprintf(&b, "long-lived connections: %d broken of %d, %d exchanges, slowest answer %v\n",
		broken, len(l.long), exchanges, rtt.Round(time.Millisecond))
	u := l.udp
	fmt.Fprintf(&b, "UDP flow: %d answered of %d (%d more late, %d never), longest run unanswered %d, longest gap between answers %v, pods %v",
		u.answered, u.sent, u.late, len(u.unanswered), u.maxRun, u.maxGap.Round(time.Millisecond), u.pods)
	return b.String()
}

// check fails t unless nothing failed: every new connection answered
// (and at least half the ticks made one: a loaded machine drops ticks),
// no long-lived connection broke and the UDP flow never missed two
// datagrams in a row.
func (l *load) check(t *testing.T, d time.Duration) {
	t.Helper()
	for _, s := range l.streams {
		if s.err != nil {
			t.Errorf("stream to %s: %v", s.name, s.err)
		}
		if len(s.res.Failures) > 0 || s.res.Skipped > 0 || s.res.Attempts < int(d.Seconds()*float64(s.connRate())/2) {
			t.Errorf("new connections to %s: want every one answered over %v: %v", s.name, d.Round(time.Second), s.res)
		}
	}
	for _, c := range l.long {
		if c.err != nil {
			t.Errorf("long-lived connection to %s (%s) broke after %d exchanges, %v into the load: %v",
				c.name, c.pod, c.exchanges, c.broke.Round(time.Millisecond), c.err)
		}
	}
	if l.lateUDP {
		// Only datagrams never answered count (see load.lateUDP).
		if n := len(l.udp.unanswered); n > 0 || l.udp.answered == 0 {
			t.Errorf("UDP flow: %d datagrams never answered", n)
		}
		return
	}
	if l.udp.maxRun > 1 || l.udp.answered == 0 {
		t.Errorf("UDP flow interrupted for %d intervals in a row (longest gap %v)", l.udp.maxRun, l.udp.maxGap.Round(time.Millisecond))
	}
}
