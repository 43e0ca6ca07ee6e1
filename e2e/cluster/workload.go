package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
)

// EchoPort is the port of the echo Services.
const EchoPort = 80

// EchoWorkload is a Deployment of agnhost serve-hostname pods behind the
// ClusterIP Service "echo" (AgnhostWorkload "echo") and the NodePort
// Service "echo-np", and a pod "client" on node clientNode that tests run
// probes from.
func EchoWorkload(namespace string, replicas, clientNode int) string {
	return AgnhostWorkload(namespace, "echo", replicas, 0) + fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: echo-np, namespace: %[1]s}
spec:
  type: NodePort
  selector: {app: echo}
  ports: [{port: %[2]d, targetPort: %[3]d}]
---
`, namespace, EchoPort, AgnhostPort) + ClientPod(namespace, clientNode)
}

// ClientPod is the pod "client" (agnhost pausing) on node clientNode, for
// connections from a pod.
func ClientPod(namespace string, clientNode int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: client, namespace: %[1]s}
spec:
  nodeName: %[3]s
  terminationGracePeriodSeconds: 1
  containers:
    - name: client
      image: %[2]s
      imagePullPolicy: Never
      args: [pause]
`, namespace, images.AgnhostRef, NodeName(clientNode))
}

// AgnhostWorkload is the namespace, AgnhostDeployment name and the
// ClusterIP Service name in front of it on port EchoPort.
func AgnhostWorkload(namespace, name string, replicas, readyDelay int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
%[3]s---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  selector: {app: %[2]s}
  ports: [{port: %[4]d, targetPort: %[5]d}]
`, namespace, name, AgnhostDeployment(namespace, name, replicas, readyDelay), EchoPort, AgnhostPort)
}

// AgnhostPort is the port AgnhostDeployment's pods serve on.
const AgnhostPort = 9376

// AgnhostDeployment is a Deployment name (pods labelled app=name) of
// agnhost serve-hostname pods: each answers a TCP connection on
// AgnhostPort with its name and closes it. A pod is Ready once the port
// accepts, probed every second from readyDelay seconds after its start;
// a deleted pod goes within a second (grace 1 s).
func AgnhostDeployment(namespace, name string, replicas, readyDelay int) string {
	delay := ""
	if readyDelay > 0 {
		delay = fmt.Sprintf("\n            initialDelaySeconds: %d", readyDelay)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: %[2]s
          image: %[4]s
          imagePullPolicy: Never
          args: [serve-hostname, --tcp, --http=false, --port=%[5]d]
          ports: [{containerPort: %[5]d}]
          readinessProbe:
            tcpSocket: {port: %[5]d}
            periodSeconds: 1%[6]s
`, namespace, name, replicas, images.AgnhostRef, AgnhostPort, delay)
}

// ReadyEndpoints counts the ready endpoints in a Service's EndpointSlices.
func (c *Cluster) ReadyEndpoints(ctx context.Context, namespace, svc string) (int, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "endpointslices", "-l", "kubernetes.io/service-name="+svc,
		"-o", `jsonpath={range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}`)
	if err != nil {
		return 0, err
	}
	return strings.Count(string(out), "true"), nil
}

// ServiceAddr is a Service's cluster IP with its first port.
func (c *Cluster) ServiceAddr(ctx context.Context, namespace, svc string) (netip.AddrPort, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "svc", svc, "-o", "jsonpath={.spec.clusterIP} {.spec.ports[0].port}")
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap, err := netip.ParseAddrPort(strings.Replace(strings.TrimSpace(string(out)), " ", ":", 1))
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("service %s/%s: %w", namespace, svc, err)
	}
	return ap, nil
}

// NodePort is a Service's first node port.
func (c *Cluster) NodePort(ctx context.Context, namespace, svc string) (uint16, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "svc", svc, "-o", "jsonpath={.spec.ports[0].nodePort}")
	if err != nil {
		return 0, err
	}
	p, err := strconv.ParseUint(strings.TrimSpace(string(out)), 10, 16)
	if err != nil {
		return 0, fmt.Errorf("service %s/%s node port: %w", namespace, svc, err)
	}
	return uint16(p), nil
}
