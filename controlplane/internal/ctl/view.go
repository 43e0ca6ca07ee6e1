package ctl

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func viewCommand() command {
	return command{
		name: "view", args: "NODE", nargs: 1,
		summary: "NODE's desired view: its NodeConfig and services (GetNodeView)",
		detail: "The view the control plane wants NODE to have (not necessarily what it acknowledged: see diff).\n" +
			"One line per resource: for services the type, cluster IPs, external and load-balancer IPs,\n" +
			"ports (name:port[:nodePort]/protocol) and how many cluster-wide and node-local endpoints the node\n" +
			"may use. -o json prints the whole response, every endpoint included.",
		run: runView,
	}
}

func runView(ctx context.Context, s *session, args []string) (int, error) {
	_, err := query(ctx, s, "GetNodeView", s.client.GetNodeView, &switchyardv1.GetNodeViewRequest{NodeName: args[0]},
		func(w io.Writer, resp *switchyardv1.GetNodeViewResponse) error { return printView(w, args[0], resp) })
	return ExitOK, err
}

func printView(w io.Writer, node string, resp *switchyardv1.GetNodeViewResponse) error {
	fmt.Fprintf(w, "node %s: view %s, %d resources\n", node, resp.GetVersion(), len(resp.GetResources()))
	if resp.GetViewsMayBeStale() {
		fmt.Fprintln(w, "warning: the control plane cannot reach the Kubernetes API: this view may lag the cluster (see status)")
	}
	t := newTable(w)
	row(t, "NAME", "KIND", "TYPE", "CLUSTER IPS", "EXTERNAL IPS", "PORTS", "ENDPOINTS", "LOCAL")
	for _, r := range resp.GetResources() {
		switch {
		case r.GetService() != nil:
			sv := r.GetService()
			row(t, r.GetName(), "Service", serviceTypeText(sv.GetType()),
				strings.Join(sv.GetClusterIps(), ","),
				strings.Join(append(append([]string(nil), sv.GetExternalIps()...), sv.GetLoadBalancerIps()...), ","),
				portsText(sv.GetPorts()),
				strconv.Itoa(len(sv.GetClusterEndpoints())), strconv.Itoa(len(sv.GetLocalEndpoints())))
		case r.GetNodeConfig() != nil:
			row(t, r.GetName(), "NodeConfig", "", "", "", "", "", "")
		default:
			row(t, r.GetName(), "unknown", "", "", "", "", "", "")
		}
	}
	return t.Flush()
}

// serviceTypeText is a ServiceType as Kubernetes spells it.
func serviceTypeText(t switchyardv1.ServiceType) string {
	switch t {
	case switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP:
		return "ClusterIP"
	case switchyardv1.ServiceType_SERVICE_TYPE_NODE_PORT:
		return "NodePort"
	case switchyardv1.ServiceType_SERVICE_TYPE_LOAD_BALANCER:
		return "LoadBalancer"
	}
	return ""
}

// portsText is kubectl's PORT(S) with names: "http:80:30080/TCP".
func portsText(ports []*switchyardv1.ServicePort) string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		s := strconv.FormatUint(uint64(p.GetPort()), 10)
		if p.GetName() != "" {
			s = p.GetName() + ":" + s
		}
		if p.GetNodePort() != 0 {
			s += ":" + strconv.FormatUint(uint64(p.GetNodePort()), 10)
		}
		out = append(out, s+"/"+strings.TrimPrefix(p.GetProtocol().String(), "PROTOCOL_"))
	}
	return strings.Join(out, ",")
}
