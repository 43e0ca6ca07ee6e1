package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/dataplane"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// explainModes are the modes --mode takes, as the agent's --mode spells
// them; dry-run programs nothing, so there is nothing to explain for it.
var explainModes = map[string]switchyardv1.DataplaneMode{
	"iptables":  switchyardv1.DataplaneMode_DATAPLANE_MODE_IPTABLES,
	"ipvs":      switchyardv1.DataplaneMode_DATAPLANE_MODE_IPVS,
	"nftables":  switchyardv1.DataplaneMode_DATAPLANE_MODE_NFTABLES,
	"userspace": switchyardv1.DataplaneMode_DATAPLANE_MODE_USERSPACE,
}

func explainCommand() command {
	return command{
		name: "explain", args: "NODE PROTO SRC DST:PORT", nargs: 4,
		summary: "what NODE does with one packet: forward to which endpoints, reject, drop or pass (Explain)",
		detail: "PROTO is tcp, udp or sctp; SRC an address (one of the node's own is the node itself, any other\n" +
			"arrives from the network, a pod on the node included), or ADDR:PORT with the client's port, which a\n" +
			"maglev service needs to name its one endpoint; DST:PORT the destination, [v6]:port for IPv6.\n" +
			"Prints the one-line answer, the endpoints with their share of new connections, whether the endpoint\n" +
			"sees the node's address (masquerade), the rule that decided and notes, and which view was explained:\n" +
			"the one the node acknowledged unless --desired (or the node acknowledged none).\n" +
			"Example: switchyardctl explain node-a tcp 10.244.1.5 10.96.0.10:80",
		bind: func(fs *flag.FlagSet) action {
			desired := fs.Bool("desired", false, "explain the view the control plane wants the node to have instead of the one it acknowledged (programmed)")
			mode := fs.String("mode", "", "explain for this dataplane mode: iptables, ipvs, nftables or userspace; empty: the mode the agent reports, else the NodeConfig's, else iptables")
			return func(ctx context.Context, s *session, args []string) (int, error) {
				req, err := explainRequest(args, *desired, *mode)
				if err != nil {
					return 0, err
				}
				return runExplain(ctx, s, req)
			}
		},
	}
}

// explainRequest reads NODE PROTO SRC DST:PORT and the flags; bad input is
// a usage error, found before any RPC.
func explainRequest(args []string, desired bool, mode string) (*switchyardv1.ExplainRequest, error) {
	req := &switchyardv1.ExplainRequest{NodeName: args[0], Protocol: strings.ToLower(args[1]), Desired: desired}
	switch req.Protocol {
	case "tcp", "udp", "sctp":
	default:
		return nil, usagef("PROTO %q: want tcp, udp or sctp", args[1])
	}
	src, err := netip.ParseAddr(args[2])
	if err != nil {
		ap, err2 := netip.ParseAddrPort(args[2])
		if err2 != nil || ap.Port() == 0 {
			return nil, usagef("SRC %q: want an IP address, or address:port ([v6]:port)", args[2])
		}
		src, req.SourcePort = ap.Addr(), uint32(ap.Port())
	}
	host, port, err := net.SplitHostPort(args[3])
	if err != nil {
		return nil, usagef("DST:PORT %q: want address:port, [v6]:port for IPv6", args[3])
	}
	dst, err := netip.ParseAddr(host)
	if err != nil {
		return nil, usagef("DST:PORT %q: %q is not an IP address", args[3], host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return nil, usagef("DST:PORT %q: port %q: want 1-65535", args[3], port)
	}
	req.SourceIp, req.DestinationIp, req.DestinationPort = src.String(), dst.String(), uint32(p)
	if mode != "" {
		m, ok := explainModes[strings.ToLower(mode)]
		if !ok {
			return nil, usagef("--mode %q: want iptables, ipvs, nftables or userspace", mode)
		}
		req.Mode = m
	}
	return req, nil
}

func runExplain(ctx context.Context, s *session, req *switchyardv1.ExplainRequest) (int, error) {
	_, err := query(ctx, s, "Explain", s.client.Explain, req, printExplain)
	return ExitOK, err
}

func printExplain(w io.Writer, resp *switchyardv1.ExplainResponse) error {
	fmt.Fprintln(w, resp.GetSummary())
	if eps := resp.GetEndpoints(); len(eps) > 0 {
		t := newTable(w)
		row(t, "ENDPOINT", "SHARE")
		for _, e := range eps {
			row(t, net.JoinHostPort(e.GetAddress(), strconv.FormatUint(uint64(e.GetPort()), 10)),
				fmt.Sprintf("%.1f%%", e.GetShare()*100))
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	t := newTable(w)
	row(t, "masquerade:", yesNo(resp.GetMasquerade()))
	if sec := resp.GetSessionAffinityTimeoutSeconds(); sec > 0 {
		row(t, "affinity:", fmt.Sprintf("ClientIP for %ds", sec))
	}
	row(t, "reason:", resp.GetReason())
	for _, n := range resp.GetNotes() {
		row(t, "note:", n)
	}
	row(t, "version:", resp.GetVersion())
	row(t, "mode:", dataplane.ModeName(resp.GetMode()))
	row(t, "applied:", yesNo(resp.GetApplied()))
	return t.Flush()
}
