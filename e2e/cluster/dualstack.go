package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Services of DualStackWorkload, one per IP family policy a dual-stack
// cluster offers.
const (
	// DualStackSvc is RequireDualStack, IPv4 primary: one cluster IP of
	// each family.
	DualStackSvc = "echo-ds"
	// PreferDualStackNodePortSvc is a PreferDualStack NodePort Service,
	// IPv6 primary: the node port answers on both node addresses.
	PreferDualStackNodePortSvc = "echo-np6"
	// IPv6AffinitySvc is SingleStack IPv6 with ClientIP session affinity.
	IPv6AffinitySvc = "echo-v6-affinity"
	// IPv6NoEndpointsSvc is SingleStack IPv6 selecting no pod: the proxy
	// must refuse connections to it at once (REJECT), not drop them.
	IPv6NoEndpointsSvc = "none-v6"
	// IPv6LocalNodePortSvc is a SingleStack IPv6 NodePort Service with
	// externalTrafficPolicy Local: a node port answers only from pods on
	// that node.
	IPv6LocalNodePortSvc = "echo-local6"
	// IPv6UDPSvc is SingleStack IPv6 over UDP, for conntrack cleanup.
	IPv6UDPSvc = "echo-udp6"
)

// DualStackWorkload is EchoWorkload's Deployment and client pod behind
// the Services above (every Service on EchoPort → 9376). agnhost
// serve-hostname listens on one dual-stack socket, so every pod answers
// in both families.
func DualStackWorkload(namespace string, replicas, clientNode int) string {
	service := func(name, typ, policy, families, extra string) string {
		return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  type: %s
  ipFamilyPolicy: %s
  ipFamilies: [%s]
  selector: {app: echo}
  ports: [{port: %d, targetPort: 9376}]
%s`, name, namespace, typ, policy, families, EchoPort, extra)
	}
	var b strings.Builder
	// The echo pods answer UDP on the same port too (serve-hostname
	// --udp), for the UDP Service.
	b.WriteString(strings.Replace(EchoWorkload(namespace, replicas, clientNode),
		"args: [serve-hostname, --tcp,", "args: [serve-hostname, --tcp, --udp,", 1))
	b.WriteString(service(DualStackSvc, "ClusterIP", "RequireDualStack", "IPv4, IPv6", ""))
	b.WriteString(service(PreferDualStackNodePortSvc, "NodePort", "PreferDualStack", "IPv6, IPv4", ""))
	b.WriteString(service(IPv6AffinitySvc, "ClusterIP", "SingleStack", "IPv6",
		"  sessionAffinity: ClientIP\n  sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}\n"))
	// A selector no pod matches: the EndpointSlice controller keeps an
	// empty slice.
	b.WriteString(strings.Replace(service(IPv6NoEndpointsSvc, "ClusterIP", "SingleStack", "IPv6", ""),
		"selector: {app: echo}", "selector: {app: nothing}", 1))
	b.WriteString(service(IPv6LocalNodePortSvc, "NodePort", "SingleStack", "IPv6", "  externalTrafficPolicy: Local\n"))
	b.WriteString(strings.Replace(service(IPv6UDPSvc, "ClusterIP", "SingleStack", "IPv6", ""),
		"ports: [{port:", "ports: [{protocol: UDP, port:", 1))
	return b.String()
}

// ServiceAddrs is every cluster IP of a Service (spec.clusterIPs, primary
// first) with its first port.
func (c *Cluster) ServiceAddrs(ctx context.Context, namespace, svc string) ([]netip.AddrPort, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "svc", svc, "-o",
		`jsonpath={.spec.ports[0].port}{range .spec.clusterIPs[*]} {@}{end}`)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return nil, fmt.Errorf("service %s/%s: no cluster IP (%q)", namespace, svc, out)
	}
	port, err := strconv.ParseUint(f[0], 10, 16)
	if err != nil {
		return nil, fmt.Errorf("service %s/%s port: %w", namespace, svc, err)
	}
	var addrs []netip.AddrPort
	for _, s := range f[1:] {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("service %s/%s: %w", namespace, svc, err)
		}
		addrs = append(addrs, netip.AddrPortFrom(a, uint16(port)))
	}
	return addrs, nil
}

// PodsByNode maps each node to the names of the pods matching selector
// in namespace that run on it.
func (c *Cluster) PodsByNode(ctx context.Context, namespace, selector string) (map[string][]string, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "pods", "-l", selector, "-o",
		`jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name}{"\n"}{end}`)
	if err != nil {
		return nil, err
	}
	pods := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) == 2 {
			pods[f[0]] = append(pods[f[0]], f[1])
		}
	}
	return pods, nil
}

// PodIPs is a pod's status.podIPs, in the order kubelet reports them.
func (c *Cluster) PodIPs(ctx context.Context, namespace, pod string) ([]netip.Addr, error) {
	out, err := c.Kubectl(ctx, "-n", namespace, "get", "pod", pod, "-o", `jsonpath={range .status.podIPs[*]}{.ip} {end}`)
	if err != nil {
		return nil, err
	}
	var ips []netip.Addr
	for _, s := range strings.Fields(string(out)) {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", namespace, pod, err)
		}
		ips = append(ips, a)
	}
	return ips, nil
}
