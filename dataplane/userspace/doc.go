// Package userspace is the userspace data plane: a Go proxy in the agent's
// process listens on every service port and relays each connection (TCP)
// or client flow (UDP) to a backend. It needs no netfilter: it is the
// mode for nodes without netfilter privileges, and a fallback.
//
// # Render, then apply
//
// plan(State) turns the node's views into frontends without I/O: one per
// (protocol, address, port) a client may use, each with its backends:
//
//   - cluster IPs and port: local_endpoints when internal_traffic_policy
//     is LOCAL, else cluster_endpoints;
//   - external IPs, load-balancer IPs and port, and node ports on every
//     NodeConfig.node_ips address (0.0.0.0 and :: when the list is
//     empty): local_endpoints when external_traffic_policy is LOCAL, else
//     cluster_endpoints;
//   - backends are the endpoints listing the service port's name, on
//     their target port, of the frontend's address family, sorted.
//
// Bad input (names, addresses, ports, SCTP, two services on one address
// and port) is skipped and logged; the first service by name keeps a
// contested address.
//
// Apply reconciles by difference: a frontend that went away is closed with
// its connections; one that remains keeps its socket and gets the new
// backend list atomically (connections to backends still listed stay up,
// the others are closed); a new one is opened. A frontend whose listener
// cannot be opened fails Apply (the agent NACKs) while every other one is
// in place, and is retried by the next Apply — except when another socket
// of the node already holds its address and port (EADDRINUSE: a
// host-network server on the service's port, which gets the traffic
// anyway): that is logged and retried without failing Apply.
//
// # No endpoints: no listener
//
// Views are read and each port's policy decided by package serviceport,
// as in every other mode. A frontend whose decided endpoint set is empty
// gets no socket. Where the address is local the kernel then refuses at
// once (TCP RST, ICMP port unreachable for UDP), which is the REJECT of
// the other modes. The DROP that serviceport decides when the port has
// endpoints elsewhere in the cluster is not reproduced: the client is
// refused instead of timing out.
//
// # Balancing and retry
//
// Each frontend rotates over its backends in address order, one turn per
// new TCP connection or UDP session, so shares are exactly equal. With
// ClientIP affinity a client returns to its backend while it has used it
// within the timeout (Config.Now is the clock). When a backend refuses or
// does not answer within Config.DialTimeout the next backend in rotation
// is tried, up to every backend once, before the client is reset; a UDP
// session whose backend answers with ICMP port unreachable moves to the
// next one and resends the client's latest datagram. Backends see the
// node's address as the source: a userspace proxy cannot preserve the
// client's.
//
// # UDP sessions
//
// Each client address (IP and port) is a session with its own socket
// connected to one backend; replies return from the frontend socket. A
// session ends after Config.UDPIdleTimeout without a datagram either way;
// MaxUDPSessions bounds them per frontend.
//
// # Where sockets listen
//
// With BindServiceAddress (default) the socket binds the service address
// itself, with IP_FREEBIND (no privilege needed; IP_TRANSPARENT would need
// CAP_NET_ADMIN), so binding never depends on the address being assigned.
// Ports below 1024 still need CAP_NET_BIND_SERVICE (or
// net.ipv4.ip_unprivileged_port_start).
// Packets reach it when the address is local on the node, for example with
// one route that makes the whole service range local (no netfilter):
//
//	ip route add local 10.96.0.0/12 dev lo
//
// plus routes on other machines sending the range to the node. With
// BindLocalPort (or when a service address cannot be bound and
// Config.LocalAddress is set) the socket listens on LocalAddress with a
// kernel-chosen port and Listener.RedirectRules gives the rules that steer
// the service address to it; the log prints them as well:
//
//	iptables -t nat -A PREROUTING -p tcp -d 10.96.0.10 --dport 80 -j REDIRECT --to-ports 41000
//	iptables -t nat -A OUTPUT     -p tcp -d 10.96.0.10 --dport 80 -j REDIRECT --to-ports 41000
//
// (DNAT --to-destination instead of REDIRECT when LocalAddress is a
// specific address.) This mode never installs them. Node ports always bind
// the node address directly.
//
// # Lifetime
//
// Every goroutine (accept and read loops, connection relays, UDP reply
// loops) is counted in one wait group and ends when its socket is closed;
// Cleanup closes everything and returns when all have returned. The end
// of Config.Context closes everything too, after which Apply fails.
// Closing means connections proxied by this mode end: switching to
// another mode drops them.
//
// # The kernel seam
//
// Sockets (ListenTCP, ListenUDP, DialTCP, DialUDP) is the only access to
// the kernel; HostSockets opens sockets in the process's namespace. Unit
// tests use it on loopback (no root) and wrap it to inject failures; the
// e2e tests open sockets inside a node namespace.
package userspace
