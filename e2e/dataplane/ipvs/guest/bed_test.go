package guest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	mobyipvs "github.com/moby/ipvs"
	"github.com/vishvananda/netlink"

	"github.com/switchyard-proxy/switchyard/dataplane"
	"github.com/switchyard-proxy/switchyard/dataplane/ipvs"
	"github.com/switchyard-proxy/switchyard/dataplane/xtables"
	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

// probeTimeout bounds one attempt that must succeed. The guest runs under
// TCG on a shared machine, where a vCPU can stall for seconds while guest
// time runs on: a short timeout there fails attempts the kernel would have
// served. A lost SYN is retransmitted after 1 and 3 s, so any real drop
// longer than a blip still fails.
const probeTimeout = 10 * time.Second

// backendPort is where every echo server listens (TCP and UDP).
const backendPort = 8080

// bed is one node with pods running echo servers, and the client.
type bed struct {
	topo *netns.Topology
	node netns.Node
	pods []netns.Pod
}

// newBed builds a topology of one node with pods echo servers (TCP and UDP
// on backendPort, reporting the client address; a TCP connection stays open
// and echoes what it receives after the reply line).
func newBed(ctx context.Context, log *slog.Logger, pods int) (*bed, error) {
	// No ICMP rate limit: the explain walk's refused UDP case follows a
	// refused TCP one, the two spend the node's whole burst of errors to
	// the client, and in CI one UDP attempt got no answer. How fast the
	// tests may ask is not what they check.
	topo, err := netns.Create(ctx, netns.Spec{Nodes: 1, Pods: pods, NoICMPRateLimit: true}, netns.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	_, err = echo.StartPods(ctx, echo.Launcher{Topo: topo}, topo.Pods(),
		echo.Config{TCP: fmt.Sprintf(":%d", backendPort), UDP: fmt.Sprintf(":%d", backendPort),
			Mode: echo.ModeEcho, ReportClient: true})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("echo servers: %w", err), topo.Close(ctx))
	}
	return &bed{topo: topo, node: topo.Node(0), pods: topo.Pods()}, nil
}

// useBed returns the shared bed with the node reset: nothing of the ipvs
// mode, no virtual server, no test link, whatever the previous test left
// (it may have failed half-way).
func useBed(t testing.TB) *bed {
	t.Helper()
	if err := shared.reset(t.Context()); err != nil {
		t.Fatalf("reset the node: %v", err)
	}
	return shared
}

// testLinks are links tests create in the node besides the mode's own.
var testLinks = []string{smokeLink}

// reset removes everything of the ipvs mode (Cleanup of a fresh
// Dataplane), every virtual server, and the test links from the node.
func (b *bed) reset(ctx context.Context) error {
	k, err := ipvs.NewKernel(ipvs.KernelConfig{NetnsPath: b.nodeNSPath()})
	if err != nil {
		return err
	}
	defer k.Close()
	// The guest has only iptables-legacy: no need to detect the flavour.
	dp, err := ipvs.New(k.Config(ipvs.Config{Runner: b.runner(),
		Families: []dataplane.Family{dataplane.IPv4}, Flavour: xtables.FlavourLegacy}))
	if err != nil {
		return err
	}
	var errs []error
	errs = append(errs, dp.Cleanup(ctx))
	if h, err := mobyipvs.New(b.nodeNSPath()); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, h.Flush())
		h.Close()
	}
	errs = append(errs, b.topo.Do(b.node.NS, func() error {
		for _, name := range testLinks {
			if l, err := netlink.LinkByName(name); err == nil {
				if err := netlink.LinkDel(l); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	return errors.Join(errs...)
}

// nodeNSPath is the namespace file of the node, for handles opened by path.
func (b *bed) nodeNSPath() string { return "/run/netns/" + b.node.NS }

// runner runs ipset and iptables in the node namespace, through the
// topology's host guard (dptest.Runner, ip netns exec).
func (b *bed) runner() *dptest.Runner {
	return dptest.NewRunner(b.topo, b.node.NS, dptest.RunnerOptions{})
}

// backend returns the address a pod's echo server listens on.
func backend(p netns.Pod) netip.AddrPort { return netip.AddrPortFrom(p.IP, backendPort) }

// sequence makes n TCP connections one after another from namespace ns and
// returns which backend answered each, "!reason" for a failure.
func (b *bed) sequence(t testing.TB, ns string, addr netip.AddrPort, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	p := probe.New(b.topo, ns)
	for range n {
		res, err := p.TCP(t.Context(), addr, probe.Options{Timeout: probeTimeout})
		if err != nil {
			t.Fatalf("probe %s from %s: %v", addr, ns, err)
		}
		switch {
		case len(res.Failures) > 0:
			out = append(out, "!"+string(res.Failures[0].Reason))
		default:
			out = append(out, slices.Collect(maps.Keys(res.Counts))[0])
		}
	}
	return out
}

// checkRoundRobin asserts seq visits every backend in a fixed cyclic
// order: each of the k backends exactly len(seq)/k times, the cycle
// repeating without deviation.
func checkRoundRobin(t testing.TB, seq []string, k int) {
	t.Helper()
	if len(seq) < k {
		t.Fatalf("sequence %v shorter than %d backends", seq, k)
	}
	cycle := seq[:k]
	seen := map[string]bool{}
	for _, name := range cycle {
		if strings.HasPrefix(name, "!") || seen[name] {
			t.Fatalf("first %d replies %v are not %d distinct backends", k, cycle, k)
		}
		seen[name] = true
	}
	for i, name := range seq {
		if name != cycle[i%k] {
			t.Fatalf("reply %d is %s, want %s: not an exact rotation: %v", i, name, cycle[i%k], seq)
		}
	}
}

// counts tallies a sequence.
func counts(seq []string) map[string]int {
	m := map[string]int{}
	for _, s := range seq {
		m[s]++
	}
	return m
}

// nodeLinkAddrs lists the IPv4 and IPv6 addresses of link name in the node
// namespace; nil when the link does not exist.
func (b *bed) nodeLinkAddrs(t testing.TB, name string) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	err := b.topo.Do(b.node.NS, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			if _, ok := err.(netlink.LinkNotFoundError); ok {
				return nil
			}
			return err
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range as {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && !ip.Unmap().IsLinkLocalUnicast() {
				out = append(out, ip.Unmap())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("addresses of %s in the node: %v", name, err)
	}
	return out
}
