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

// EchoWorkload is a Deployment of agnhost serve-hostname pods (each answers
// a TCP connection with its name and closes it) behind the ClusterIP
// Service "echo" and the NodePort Service "echo-np", and a pod "client" on
// node clientNode that tests run probes from.
func EchoWorkload(namespace string, replicas, clientNode int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: echo
          image: %[3]s
          imagePullPolicy: Never
          args: [serve-hostname, --tcp, --http=false, --port=9376]
          ports: [{containerPort: 9376}]
          readinessProbe:
            tcpSocket: {port: 9376}
            periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: %[1]s}
spec:
  selector: {app: echo}
  ports: [{port: %[5]d, targetPort: 9376}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-np, namespace: %[1]s}
spec:
  type: NodePort
  selector: {app: echo}
  ports: [{port: %[5]d, targetPort: 9376}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: %[1]s}
spec:
  nodeName: %[4]s
  terminationGracePeriodSeconds: 1
  containers:
    - name: client
      image: %[3]s
      imagePullPolicy: Never
      args: [pause]
`, namespace, replicas, images.AgnhostRef, NodeName(clientNode), EchoPort)
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
