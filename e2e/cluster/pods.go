package cluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// PodNetNS returns the network-namespace file of a running pod
// (/proc/<pid>/ns/net of its first container), found through its node's
// containerd.
func (c *Cluster) PodNetNS(ctx context.Context, namespace, pod string) (string, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "pod", pod, "-o",
		`jsonpath={.spec.nodeName} {.status.containerStatuses[0].containerID}`)
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", fmt.Errorf("pod %s/%s: not running yet (%q)", namespace, pod, out)
	}
	id := strings.TrimPrefix(f[1], "containerd://")
	n := c.nodeByName(f[0])
	if n == nil {
		return "", fmt.Errorf("pod %s/%s: unknown node %q", namespace, pod, f[0])
	}
	tasks, err := n.run(ctx, "tasks", "ctr", "-n", "k8s.io", "tasks", "ls")
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(tasks)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == id {
			if _, err := strconv.Atoi(fields[1]); err != nil {
				break
			}
			return "/proc/" + fields[1] + "/ns/net", nil
		}
	}
	return "", fmt.Errorf("pod %s/%s: container %s has no task on %s", namespace, pod, id, f[0])
}

func (c *Cluster) nodeByName(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// PodRunner runs functions inside a pod's network namespace; it satisfies
// probe.Runner (the namespace name it is given is ignored).
type PodRunner struct {
	c    *Cluster
	path string
}

// PodRunner returns a runner for the namespace file path (see PodNetNS).
func (c *Cluster) PodRunner(path string) PodRunner { return PodRunner{c: c, path: path} }

// Do runs fn on a thread inside the pod's network namespace.
func (r PodRunner) Do(_ string, fn func() error) error { return r.c.topo.DoPath(r.path, fn) }

// Resolver returns a DNS resolver whose queries leave from the pod's
// namespace towards server (kube-dns's VIP), so they go through the proxy.
func (r PodRunner) Resolver(server string) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var conn net.Conn
		var dialErr error
		err := r.Do("", func() error {
			d := net.Dialer{Timeout: 2 * time.Second}
			conn, dialErr = d.DialContext(ctx, network, server)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return conn, dialErr
	}}
}
