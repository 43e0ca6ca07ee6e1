// Command demo runs the whole of Switchyard on this machine for a human
// (`make demo`): the test bed's etcd + kube-apiserver, the real
// switchyard-controlplane, and one real switchyard-agent (iptables mode) in
// each of two node network namespaces, with three echo-server pods behind a
// ClusterIP Service. It sends traffic to the VIP from both nodes and from a
// client, prints which pods answered, scales the Service to one pod and shows
// traffic follow, prints the grpcurl commands to inspect the control plane
// (and runs ListNodes when bin/grpcurl exists), then stays up until Ctrl-C
// (or exits at once with --exit) and removes everything it created.
//
// How the agents reach the control plane: the API server and the control
// plane run in this machine's network namespace on loopback, which the node
// namespaces cannot reach. The control plane therefore serves gRPC on a unix
// socket (--listen unix:///tmp/switchyard-system-…/cp-0.sock) and the agents
// dial it with --control-plane unix:///…: a unix socket is a file, visible
// from every network namespace. Agents run inside their node namespaces
// (started by e2e/testbed/launch with nsenter --net, after the host guard),
// so their iptables rules land only there; nothing is ever programmed in the
// machine's own namespace.
//
// It needs root (network namespaces, iptables inside them) and the test-bed
// binaries (`make deps` or `make testbed`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cmd/internal/cmdshell"
	"github.com/switchyard-proxy/switchyard/e2e/system"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/echo"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/netns"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

func main() {
	if code, ok := echo.RunChild(); ok { // the pods' echo servers re-exec this binary
		os.Exit(code)
	}
	exit := flag.Bool("exit", false, "tear down as soon as the demo has run (CI smoke) instead of waiting for Ctrl-C")
	verbose := flag.Bool("v", false, "log the harness's progress and every child process's output")
	count := flag.Int("count", 60, "connections per source")
	flag.Parse()
	if err := preflight(); err != nil {
		cmdshell.Exit("demo", cmdshell.Usage(err))
	}
	cmdshell.Run("demo", func(ctx context.Context) error { return run(ctx, os.Stdout, *exit, *verbose, *count) })
}

// preflight says exactly what is missing before anything starts.
func preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root: it creates network namespaces and runs the agents' iptables inside them " +
			"(nothing touches this machine's own namespace); run `sudo make demo`")
	}
	if err := apiserver.Available(); err != nil {
		return fmt.Errorf("%w\nbuild the test-bed etcd and kube-apiserver first: `make deps` (first build 10-18 min)", err)
	}
	return nil
}

func run(ctx context.Context, out io.Writer, exit, verbose bool, count int) (err error) {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	step(out, "starting etcd + kube-apiserver, switchyard-controlplane, 2 node namespaces with an agent each, 3 pods")
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c, err := system.Start(startCtx, system.Config{Nodes: 2, Pods: 3, Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		step(out, "tearing down: agents, pods, namespaces, control plane, API server")
		err = errors.Join(err, c.Close())
		if err == nil {
			fmt.Fprintln(out, "   done; nothing left behind")
		}
	}()
	fmt.Fprintf(out, "   API server %s, topology %s, control plane on %s\n", c.API.URL(), c.Topo.ID(), c.Target)

	step(out, "waiting until both agents ACK their views (AdminService/ListNodes)")
	if err := waitSettled(ctx, c); err != nil {
		return err
	}
	if err := printNodes(ctx, out, c); err != nil {
		return err
	}

	step(out, fmt.Sprintf("Service %s/%s ClusterIP %s: %d connections from each node and the client", system.Namespace, system.ServiceName, c.VIP(), count))
	if err := traffic(ctx, out, c, count); err != nil {
		return err
	}

	only := c.Topo.Pods()[1]
	step(out, "scaling the EndpointSlice down to "+only.Name)
	if err := c.ScaleTo(ctx, []netns.Pod{only}); err != nil {
		return err
	}
	start := time.Now()
	if err := waitOnly(ctx, c, only.Name); err != nil {
		return err
	}
	fmt.Fprintf(out, "   every source reaches only %s %v after the EndpointSlice write\n", only.Name, time.Since(start).Round(time.Millisecond))
	if err := waitSettled(ctx, c); err != nil {
		return err
	}
	if err := traffic(ctx, out, c, count); err != nil {
		return err
	}
	step(out, "scaling back to every pod")
	if err := c.ScaleTo(ctx, c.Topo.Pods()); err != nil {
		return err
	}
	if err := waitSettled(ctx, c); err != nil {
		return err
	}

	inspect(ctx, out, c)
	if exit {
		return nil
	}
	step(out, "running; press Ctrl-C to tear everything down")
	<-ctx.Done()
	return nil
}

func step(out io.Writer, msg string) { fmt.Fprintf(out, "\n== %s\n", msg) }

func waitSettled(ctx context.Context, c *system.Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.WaitSettled(ctx)
}

// waitOnly polls small probes from every source until pod alone answers.
func waitOnly(ctx context.Context, c *system.Cluster, pod string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, s := range sources(c) {
		for {
			res, err := probe.New(c.Topo, s.ns).TCP(ctx, c.VIP(), probe.Options{Count: 10, Parallel: 5, Timeout: time.Second})
			if err != nil {
				return err
			}
			if res.Counts[pod] == 10 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s still reaches other pods: %v: %w", s.name, res.Counts, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

type source struct{ name, ns string }

// sources are the namespaces traffic starts from: every node and the client.
func sources(c *system.Cluster) []source {
	var out []source
	for _, n := range c.Topo.Nodes() {
		out = append(out, source{n.Name, n.NS})
	}
	return append(out, source{"client (via node-0)", c.Topo.Client().NS})
}

func printNodes(ctx context.Context, out io.Writer, c *system.Cluster) error {
	nodes, err := c.ListNodes(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "   NODE\tZONE\tCONNECTED\tDESIRED\tACKED\tRESOURCES")
	for _, n := range nodes {
		fmt.Fprintf(w, "   %s\t%s\t%v\t%s\t%s\t%d\n", n.GetName(), n.GetZone(), n.GetConnected(),
			n.GetDesiredVersion(), n.GetAckedVersion(), n.GetResourceCount())
	}
	return w.Flush()
}

// traffic probes the VIP from every node and the client and prints the
// per-pod counts; traffic must have no failures.
func traffic(ctx context.Context, out io.Writer, c *system.Cluster, count int) error {
	for _, s := range sources(c) {
		res, err := probe.New(c.Topo, s.ns).TCP(ctx, c.VIP(), probe.Options{Count: count, Parallel: 4, Timeout: 2 * time.Second})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "   %-20s → %s: %s", s.name, c.VIP(), counts(res.Counts))
		if len(res.Failures) > 0 {
			fmt.Fprintf(out, "  FAILURES %v", res.Reasons())
		}
		fmt.Fprintln(out)
	}
	return nil
}

func counts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d ", n, m[n])
	}
	return strings.TrimSpace(b.String())
}

// inspect prints the grpcurl and ip-netns commands and runs ListNodes with
// bin/grpcurl when it exists.
func inspect(ctx context.Context, out io.Writer, c *system.Cluster) {
	grpcurl := "grpcurl"
	if root, err := apiserver.RepoRoot(); err == nil {
		if p := filepath.Join(root, "bin", "grpcurl"); fileExists(p) {
			grpcurl = p
		}
	}
	base := fmt.Sprintf("%s -plaintext -unix %s", grpcurl, c.Socket)
	step(out, "inspect it (in another terminal, while this runs)")
	fmt.Fprintf(out, "   %s list\n", base)
	fmt.Fprintf(out, "   %s switchyard.v1.AdminService/ListNodes\n", base)
	fmt.Fprintf(out, "   %s -d '{\"node_name\":\"node-0\"}' switchyard.v1.AdminService/GetNodeView\n", base)
	fmt.Fprintf(out, "   %s -d '{\"namespace\":%q,\"name\":%q}' switchyard.v1.AdminService/GetService\n", base, system.Namespace, system.ServiceName)
	fmt.Fprintf(out, "   ip netns exec %s iptables-save -t nat\n", c.Topo.Node(0).NS)
	fmt.Fprintf(out, "   echo hi | ip netns exec %s socat - TCP:%s\n", c.Topo.Client().NS, c.VIP())
	if grpcurl == "grpcurl" {
		fmt.Fprintln(out, "   (bin/grpcurl not found: `make tools` installs it)")
		return
	}
	fmt.Fprintf(out, "\n   $ %s switchyard.v1.AdminService/ListNodes\n", base)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A client of the unix socket only: it runs in this namespace.
	b, err := launch.Run(ctx, nil, launch.Spec{Name: "grpcurl", Loopback: true,
		Argv: []string{grpcurl, "-plaintext", "-unix", c.Socket, "switchyard.v1.AdminService/ListNodes"}})
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(out, "   %s\n", line)
	}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		fmt.Fprintf(out, "   grpcurl: %v\n", exit) // its output is above
	case err != nil:
		fmt.Fprintf(out, "   grpcurl: %v\n", err)
	}
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
