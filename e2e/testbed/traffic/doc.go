// Package traffic measures what a proxy's data path costs a connection,
// between network namespaces of a test bed (e2e/testbed/netns):
//
//		client ns ──SYN──▶ node ns (proxy: NAT rules or a userspace relay) ──▶ pod ns (Sink)
//
//	  - Sink is a TCP server opened inside a pod namespace: it accepts,
//	    counts what it reads until EOF, answers with the 8-byte count and
//	    closes. Connections the client resets are simply dropped.
//	  - Connect times connect() of a socket created in the client namespace,
//	    one at a time over a list of targets in turn, on a thread of its own
//	    (raw syscalls and poll, no Go netpoller in the way): SYN out until the
//	    SYN-ACK makes the connect complete. The socket is then closed with a
//	    reset (SO_LINGER 0), so the client never holds TIME_WAIT and long
//	    runs do not run out of ports. A userspace proxy answers the SYN
//	    itself before it dials a backend, so there connect times the
//	    proxy's accept, not the path to the pod (Rate and Bulk go through).
//	  - Rate makes short connections end to end (connect, half-close, read
//	    the sink's answer, reset) in a closed loop with a fixed number of
//	    workers for a fixed time, and reads the machine's busy CPU
//	    time (/proc/stat) over the same window: CPU per connection counts the
//	    client, the node and the sink alike, so only differences between
//	    proxies measured the same way mean anything.
//	  - Bulk sends over one connection for a fixed time and reports what the
//	    sink received per second (the sink's count, not what the client
//	    wrote into its socket buffer).
//
// Invariants: every socket is created on a thread that entered its
// namespace through the topology (Topology.Do, which refuses the machine's
// own); nothing is timed against a threshold here — results are numbers,
// failures are counted with their first error.
package traffic
