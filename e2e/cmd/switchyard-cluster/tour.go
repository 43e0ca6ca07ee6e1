package main

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

const demoNS = "demo"

// tour shows what users see: echo pods behind a Service, traffic from a pod
// and from a node spread over them, a scale-down that traffic follows, and
// the control plane's view of every node through grpcurl.
func tour(ctx context.Context, c *cluster.Cluster) error {
	say("a Deployment of 3 echo pods (agnhost serve-hostname) behind Service demo/echo, and a client pod on node-0")
	if err := c.Apply(ctx, "demo", cluster.EchoWorkload(demoNS, 3, 0)); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "-n", demoNS, "rollout", "status", "deployment/echo", "--timeout=3m"); err != nil {
		return err
	}
	if _, err := c.Kubectl(ctx, "-n", demoNS, "wait", "pod/client", "--for=condition=Ready", "--timeout=3m"); err != nil {
		return err
	}
	out, _ := c.Kubectl(ctx, "-n", demoNS, "get", "pods", "-o", "wide")
	fmt.Print(string(out))
	vip, err := c.ServiceAddr(ctx, demoNS, "echo")
	if err != nil {
		return err
	}
	podNS, err := c.PodNetNS(ctx, demoNS, "client")
	if err != nil {
		return err
	}
	pod := probe.New(c.PodRunner(podNS), "")
	if err := waitBackends(ctx, pod, vip, 3); err != nil {
		return err
	}
	if err := show(ctx, pod, "pod client (node-0) → ClusterIP", vip, 60); err != nil {
		return err
	}
	node := probe.New(c.Topology(), c.NodeNS(1))
	if err := show(ctx, node, "node-1 (host network) → ClusterIP", vip, 60); err != nil {
		return err
	}
	port, err := c.NodePort(ctx, demoNS, "echo-np")
	if err != nil {
		return err
	}
	if err := show(ctx, pod, "pod client → NodePort on node-1", netip.AddrPortFrom(cluster.NodeIP(1), port), 60); err != nil {
		return err
	}

	say("kubectl scale deployment/echo --replicas=1: the EndpointSlice controller, Switchyard's control plane and every agent follow")
	begin := time.Now()
	if _, err := c.Kubectl(ctx, "-n", demoNS, "scale", "deployment/echo", "--replicas=1"); err != nil {
		return err
	}
	if err := waitBackends(ctx, pod, vip, 1); err != nil {
		return err
	}
	say(fmt.Sprintf("traffic reaches only the remaining pod %v after kubectl scale", time.Since(begin).Round(time.Millisecond)))
	if err := show(ctx, pod, "pod client → ClusterIP after scale-down", vip, 30); err != nil {
		return err
	}
	return listNodes(ctx, c)
}

// waitBackends waits until 20 connections in a row reach exactly want
// backends.
func waitBackends(ctx context.Context, p *probe.Prober, addr netip.AddrPort, want int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := p.TCP(ctx, addr, probe.Options{Count: 20, Timeout: time.Second})
		if err == nil && res.Succeeded() == 20 && len(res.Counts) == want {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s: never reached exactly %d backends", addr, want)
}

func show(ctx context.Context, p *probe.Prober, what string, addr netip.AddrPort, n int) error {
	res, err := p.TCP(ctx, addr, probe.Options{Count: n, Timeout: 2 * time.Second})
	if err != nil {
		return err
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(res.Counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", name, res.Counts[name]))
	}
	say(fmt.Sprintf("%s %s: %d/%d answered: %s", what, addr, res.Succeeded(), n, strings.Join(parts, ", ")))
	if len(res.Failures) > 0 {
		return fmt.Errorf("%s: %d failed: %v", what, len(res.Failures), res.Failures[0])
	}
	return nil
}

// listNodes runs grpcurl against every replica, as an operator would.
func listNodes(ctx context.Context, c *cluster.Cluster) error {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return err
	}
	grpcurl := filepath.Join(root, "bin", "grpcurl")
	if _, err := os.Stat(grpcurl); err != nil {
		say("bin/grpcurl not built (make tools): the AdminService view from Go instead")
		nodes, err := c.WaitSettled(ctx)
		for _, n := range nodes {
			fmt.Printf("  %s connected desired=%s acked=%s\n", n.GetName(), n.GetDesiredVersion(), n.GetAckedVersion())
		}
		return err
	}
	if _, err := c.WaitSettled(ctx); err != nil {
		return err
	}
	// Under TLS (deploy/ as shipped) an operator presents a certificate of
	// the admin group (or a bearer token: README, "Security") and verifies
	// the control plane with the CA it published.
	caFile, certFile, keyFile, err := c.AdminCredentials()
	if err != nil {
		return err
	}
	creds := []string{"-plaintext"}
	if caFile != "" {
		creds = []string{"-cacert", caFile, "-cert", certFile, "-key", keyFile}
		say("the control plane's CA: kubectl -n " + c.SwitchyardNS() + " get configmap " + cluster.CABundle + " -o jsonpath='{.data.ca\\.crt}' > " + caFile)
	}
	for i := range c.Nodes() {
		addr := fmt.Sprintf("%s:%d", cluster.NodeIP(i), cluster.GRPCPort)
		argv := append(append([]string{grpcurl}, creds...), addr, "switchyard.v1.AdminService/ListNodes")
		say("grpcurl " + strings.Join(argv[1:], " ") + "   (inside the client namespace)")
		out, err := launch.Run(ctx, c.Topology().Guard(), launch.Spec{Name: "grpcurl", NetNS: "/run/netns/" + c.ClientNS(),
			Argv: argv})
		fmt.Print(string(out))
		if err != nil {
			fmt.Printf("  (no replica on %s: %v)\n", cluster.NodeName(i), err)
		}
	}
	return nil
}
