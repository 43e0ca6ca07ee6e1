package ctl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

func statusCommand() command {
	return command{
		name: "status", summary: "every node: connected, mode, desired and acknowledged versions (ListNodes)",
		detail: "One line per node the control plane knows or that has an agent connected, after a line with the\n" +
			"control plane's watch of the Kubernetes API and the hash and source of the NodeConfig settings it sends.\n" +
			"IN SYNC is yes when the node acknowledged the version it should have, NO NODE when the control plane\n" +
			"sees no Node object of that name (a connected agent then keeps its last rules and gets no change).\n" +
			"LAST APPLY is the apply duration of the agent's latest ACK, LATENCY the network programming latency\n" +
			"of the latest ACK that measured one (changes of EndpointSlices only); NACK its latest refusal.\n" +
			"Exits 0 whatever the nodes' state: use diff NODE to test one node.",
		run: runStatus,
	}
}

func runStatus(ctx context.Context, s *session, _ []string) (int, error) {
	_, err := query(ctx, s, "ListNodes", s.client.ListNodes, &switchyardv1.ListNodesRequest{}, printStatus)
	return ExitOK, err
}

func printStatus(w io.Writer, resp *switchyardv1.ListNodesResponse) error {
	fmt.Fprintf(w, "api: %s  settings: %s\n", apiText(resp.GetApi()), settingsText(resp.GetSettings()))
	t := newTable(w)
	row(t, "NODE", "CONNECTED", "MODE", "DESIRED", "ACKED", "IN SYNC", "LAST APPLY", "LATENCY", "NACK")
	var missing []string
	for _, n := range resp.GetNodes() {
		inSync := ""
		switch {
		case n.GetNodeObject() == switchyardv1.NodeObject_NODE_OBJECT_MISSING:
			inSync = "NO NODE"
			if n.GetConnected() {
				missing = append(missing, n.GetName())
			}
		case n.GetDesiredVersion() != "":
			inSync = yesNo(n.GetDesiredVersion() == n.GetAckedVersion())
		}
		row(t, n.GetName(), yesNo(n.GetConnected()), dataplane.ModeName(n.GetAgent().GetMode()),
			n.GetDesiredVersion(), n.GetAckedVersion(), inSync,
			durationText(n.GetLastApplyDuration()), durationText(n.GetLastProgrammingLatency()), nackText(n))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(missing) > 0 {
		_, err := fmt.Fprintf(w, "no Node object: %s (agent connected; it keeps its last applied rules and receives no change until the Node exists)\n",
			strings.Join(missing, ", "))
		return err
	}
	return nil
}

// nackText is the node's latest NACK as "Code: message", "" without one.
func nackText(n *switchyardv1.NodeStatus) string {
	st := n.GetLastNack()
	if st == nil {
		return ""
	}
	return fmt.Sprintf("%s: %s", codes.Code(st.GetCode()), st.GetMessage())
}

// apiText says whether the views follow the cluster: "available", the
// resources still pending, or since when which are unavailable and why.
func apiText(api *switchyardv1.ApiWatchStatus) string {
	if api == nil {
		return "unknown"
	}
	var pending, down []string
	for _, r := range api.GetResources() {
		switch r.GetState() {
		case "pending":
			pending = append(pending, r.GetResource())
		case "unavailable":
			down = append(down, fmt.Sprintf("%s: %s", r.GetResource(), r.GetLastError()))
		}
	}
	switch {
	case api.GetViewsMayBeStale():
		since := ""
		if t := api.GetUnavailableSince(); t != nil {
			since = " since " + t.AsTime().UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("UNAVAILABLE%s, views may be stale (%s)", since, strings.Join(down, "; "))
	case len(pending) > 0:
		return fmt.Sprintf("pending (%s)", strings.Join(pending, ", "))
	}
	return "available"
}

// settingsText is the replica's settings hash and where they come from.
func settingsText(st *switchyardv1.ControlPlaneSettings) string {
	if st == nil {
		return "unknown"
	}
	from := st.GetSource()
	if cm := st.GetConfigMap(); cm != "" && from == "configmap" {
		from += " " + cm
		if rv := st.GetResourceVersion(); rv != "" {
			from += " resourceVersion " + rv
		}
	}
	hash := st.GetHash()
	if hash == "" {
		hash = "-"
	}
	out := fmt.Sprintf("%s (%s)", hash, from)
	if e := st.GetError(); e != "" {
		out += fmt.Sprintf(", ConfigMap %s refused: %s", st.GetConfigMap(), e)
	}
	return out
}
