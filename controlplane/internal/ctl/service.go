package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func serviceCommand() command {
	return command{
		name: "service", args: "NAMESPACE/NAME", nargs: 1,
		summary: "where one service is live: the nodes that applied its desired version, and how fast (GetService)",
		detail: "The first line is the control plane's summary: on how many of the nodes that have the service\n" +
			"its agent acknowledged the service's desired version, and the fleet's programming latency of the\n" +
			"service's latest change (p50 and p99, from the moment this replica computed the change to each\n" +
			"node's ACK of it; absent until a node acknowledged a change since the replica started). Then one\n" +
			"line per node: the service's version the node should have and whether it acknowledged it.\n" +
			"-o json prints the whole response, every node's view of the service included.",
		run: runService,
	}
}

// serviceName splits NAMESPACE/NAME; anything else is a usage error.
func serviceName(arg string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(arg, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", usagef("NAMESPACE/NAME %q: want a namespace and a name, as shop/web", arg)
	}
	return namespace, name, nil
}

func runService(ctx context.Context, s *session, args []string) (int, error) {
	namespace, name, err := serviceName(args[0])
	if err != nil {
		return 0, err
	}
	_, err = query(ctx, s, "GetService", s.client.GetService, &switchyardv1.GetServiceRequest{Namespace: namespace, Name: name},
		func(w io.Writer, resp *switchyardv1.GetServiceResponse) error {
			return printService(w, namespace+"/"+name, resp)
		})
	return ExitOK, err
}

func printService(w io.Writer, name string, resp *switchyardv1.GetServiceResponse) error {
	summary := resp.GetSummary()
	if summary == "" { // a control plane that predates it
		summary = fmt.Sprintf("on %d node(s)", len(resp.GetNodes()))
	}
	fmt.Fprintf(w, "service %s: %s\n", name, summary)
	t := newTable(w)
	row(t, "NODE", "DESIRED", "ACKED")
	for _, n := range resp.GetNodes() {
		row(t, n.GetNodeName(), n.GetDesiredVersion(), yesNo(n.GetAcked()))
	}
	return t.Flush()
}
