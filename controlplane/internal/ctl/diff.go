package ctl

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// diffParallel bounds the GetService calls in flight: enough to hide
// round trips, few enough not to load the control plane.
const diffParallel = 8

// unseenNote is what diff cannot tell: AdminService serves the desired
// view's content, and of the acknowledged one only per-service flags.
const unseenNote = "not compared: the NodeConfig and services removed from the desired view (AdminService has no RPC for the acknowledged view's content)"

func diffCommand() command {
	return command{
		name: "diff", args: "NODE", nargs: 1, failCode: ExitUsage,
		summary: "what NODE has not acknowledged of its desired view; exit 1 when it differs, as diff(1)",
		detail: "Compares the version of the view the control plane wants NODE to have with the one the node\n" +
			"acknowledged (ListNodes). When they differ, lists the services of the desired view (GetNodeView)\n" +
			"that the node has not acknowledged at their desired version (GetService, one call per service).\n" +
			"AdminService has no RPC for the acknowledged view's content, so a changed NodeConfig or a service\n" +
			"removed from the view shows only as differing versions. Exits 0 in sync, 1 when they differ, 2 on error.",
		run: runDiff,
	}
}

// diffResult is diff's answer; -o json prints it with protojson's naming.
type diffResult struct {
	Node             string         `json:"node"`
	DesiredVersion   string         `json:"desiredVersion"`
	AckedVersion     string         `json:"ackedVersion"`
	InSync           bool           `json:"inSync"`
	ServicesNotAcked []unackedEntry `json:"servicesNotAcked"`
	NotCompared      string         `json:"notCompared,omitempty"`
}

type unackedEntry struct {
	Name           string `json:"name"`
	DesiredVersion string `json:"desiredVersion"`
}

func runDiff(ctx context.Context, s *session, args []string) (int, error) {
	res, err := diffNode(ctx, s, args[0])
	if err != nil {
		return 0, err
	}
	if s.json() {
		err = printJSON(s.out, res)
	} else {
		err = printDiff(s.out, res)
	}
	if err != nil {
		return 0, err
	}
	if res.InSync {
		return ExitOK, nil
	}
	return ExitFailed, nil
}

func diffNode(ctx context.Context, s *session, node string) (*diffResult, error) {
	st, err := nodeStatus(ctx, s, node)
	if err != nil {
		return nil, err
	}
	res := &diffResult{Node: node, DesiredVersion: st.GetDesiredVersion(), AckedVersion: st.GetAckedVersion(),
		ServicesNotAcked: []unackedEntry{}}
	if res.DesiredVersion == "" {
		return nil, fmt.Errorf("node %q has no desired view (an agent connected under a name that is no Node?)", node)
	}
	// Versions are content hashes: equal versions are equal views.
	if res.InSync = res.DesiredVersion == res.AckedVersion; res.InSync {
		return res, nil
	}
	rctx, cancel := s.rpcContext(ctx)
	defer cancel()
	view, err := s.client.GetNodeView(rctx, &switchyardv1.GetNodeViewRequest{NodeName: node})
	if err != nil {
		return nil, callFailed("GetNodeView", err)
	}
	// The view may have moved since ListNodes: report the one compared.
	res.DesiredVersion = view.GetVersion()
	if res.InSync = res.DesiredVersion == res.AckedVersion; res.InSync {
		return res, nil
	}
	res.ServicesNotAcked, err = unacked(ctx, s, node, view.GetResources())
	res.NotCompared = unseenNote
	return res, err
}

// nodeStatus is node's entry of ListNodes.
func nodeStatus(ctx context.Context, s *session, node string) (*switchyardv1.NodeStatus, error) {
	ctx, cancel := s.rpcContext(ctx)
	defer cancel()
	resp, err := s.client.ListNodes(ctx, &switchyardv1.ListNodesRequest{})
	if err != nil {
		return nil, callFailed("ListNodes", err)
	}
	for _, n := range resp.GetNodes() {
		if n.GetName() == node {
			return n, nil
		}
	}
	return nil, fmt.Errorf("node %q is unknown to the control plane (see status)", node)
}

// unacked returns the services of resources that node has not
// acknowledged at their desired version, in the view's (name) order.
func unacked(ctx context.Context, s *session, node string, resources []*switchyardv1.Resource) ([]unackedEntry, error) {
	found := make([]*unackedEntry, len(resources))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(diffParallel)
	for i, r := range resources {
		sv := r.GetService()
		if sv == nil {
			continue
		}
		g.Go(func() error {
			e, err := serviceUnacked(gctx, s, node, sv)
			found[i] = e
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := []unackedEntry{}
	for _, e := range found {
		if e != nil {
			out = append(out, *e)
		}
	}
	return out, nil
}

// serviceUnacked returns the service's entry when node has not
// acknowledged it at its desired version, nil when it has or when the
// service left the node's view meanwhile.
func serviceUnacked(ctx context.Context, s *session, node string, sv *switchyardv1.ServiceView) (*unackedEntry, error) {
	ctx, cancel := s.rpcContext(ctx)
	defer cancel()
	resp, err := s.client.GetService(ctx, &switchyardv1.GetServiceRequest{Namespace: sv.GetNamespace(), Name: sv.GetName()})
	if status.Code(err) == codes.NotFound {
		return nil, nil // deleted since GetNodeView: no longer desired
	}
	if err != nil {
		return nil, callFailed("GetService "+sv.GetNamespace()+"/"+sv.GetName(), err)
	}
	for _, n := range resp.GetNodes() {
		if n.GetNodeName() != node {
			continue
		}
		if n.GetAcked() {
			return nil, nil
		}
		return &unackedEntry{Name: sv.GetNamespace() + "/" + sv.GetName(), DesiredVersion: n.GetDesiredVersion()}, nil
	}
	return nil, nil
}

func printDiff(w io.Writer, res *diffResult) error {
	if res.InSync {
		_, err := fmt.Fprintf(w, "node %s: in sync at %s\n", res.Node, res.DesiredVersion)
		return err
	}
	acked := res.AckedVersion
	if acked == "" {
		acked = "nothing"
	}
	fmt.Fprintf(w, "node %s: desired %s, acknowledged %s\n", res.Node, res.DesiredVersion, acked)
	if len(res.ServicesNotAcked) == 0 {
		fmt.Fprintln(w, "every service of the desired view is acknowledged at its desired version")
	} else {
		fmt.Fprintf(w, "%d service(s) not acknowledged at their desired version:\n", len(res.ServicesNotAcked))
		t := newTable(w)
		row(t, "SERVICE", "DESIRED")
		for _, e := range res.ServicesNotAcked {
			row(t, e.Name, e.DesiredVersion)
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, res.NotCompared)
	return err
}
