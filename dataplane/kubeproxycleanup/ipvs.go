package kubeproxycleanup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ipvsLink is the dummy link kube-proxy's ipvs mode binds service IPs to.
const ipvsLink = "kube-ipvs0"

// virtualServer is one virtual server of `ipvsadm -L -n`, with the
// connections IPVS counts on its real servers.
type virtualServer struct {
	flag  string // ipvsadm's: -t, -u, --sctp-service, -f
	addr  string // host:port, [v6]:port, or a firewall mark
	conns int    // active and inactive
}

// ipvsFlags maps the protocol column of `ipvsadm -L -n` to the flag that
// names a virtual server of that protocol.
var ipvsFlags = map[string]string{"TCP": "-t", "UDP": "-u", "SCTP": "--sctp-service", "FWM": "-f"}

// parseIPVSList returns the virtual servers of `ipvsadm -L -n` output:
//
//	TCP  10.96.0.1:443 rr
//	  -> 172.18.0.2:6443             Masq    1      3          12
func parseIPVSList(out string) []virtualServer {
	var vss []virtualServer
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			if flag, ok := ipvsFlags[f[0]]; ok {
				vss = append(vss, virtualServer{flag: flag, addr: f[1]})
				continue
			}
		}
		if len(f) >= 6 && f[0] == "->" && len(vss) > 0 {
			a, errA := strconv.Atoi(f[4])
			i, errI := strconv.Atoi(f[5])
			if errA == nil && errI == nil {
				vss[len(vss)-1].conns += a + i
			}
		}
	}
	return vss
}

// nodePortSets are kube-proxy's sets of node ports (IPv6: "KUBE-6-" +
// the rest), by the ipvsadm flag of their protocol.
var nodePortSets = map[string]string{
	"KUBE-NODE-PORT-TCP": "-t", "KUBE-NODE-PORT-LOCAL-TCP": "-t",
	"KUBE-NODE-PORT-UDP": "-u", "KUBE-NODE-PORT-LOCAL-UDP": "-u",
	"KUBE-NODE-PORT-SCTP-HASH": "--sctp-service", "KUBE-NODE-PORT-LOCAL-SCTP-HASH": "--sctp-service",
}

// nodePortFlag returns the ipvsadm flag of a node-port set of
// kube-proxy's, or "" for another set.
func nodePortFlag(set string) string {
	if rest, ok := strings.CutPrefix(set, "KUBE-6-"); ok {
		set = "KUBE-" + rest
	}
	return nodePortSets[set]
}

// parseSetPorts returns the ports of `ipset list SET` members: "30080"
// (bitmap:port) or "10.0.0.5,sctp:30080" (hash:ip,port).
func parseSetPorts(out string) []string {
	_, members, ok := strings.Cut(out, "Members:\n")
	if !ok {
		return nil
	}
	var ports []string
	for line := range strings.SplitSeq(members, "\n") {
		m := strings.TrimSpace(line)
		if i := strings.LastIndex(m, ":"); i >= 0 {
			m = m[i+1:]
		}
		if _, err := strconv.ParseUint(m, 10, 16); err == nil {
			ports = append(ports, m)
		}
	}
	return ports
}

// surveyIPVS sets s.ipvs to kube-proxy's virtual servers: those on an
// address bound to kube-ipvs0 and those on one of its node ports (on the
// node's addresses). Firewall-mark services and the rest are not
// kube-proxy's to judge (see the package documentation).
func (c *cleaner) surveyIPVS(ctx context.Context, s *survey) {
	nodePorts := map[string]bool{} // "-t 30080"
	for _, set := range s.ipsets {
		flag := nodePortFlag(set)
		if flag == "" {
			continue
		}
		out, err := c.r.Run(ctx, []string{"ipset", "list", set}, nil)
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("ipset list %s: %w", set, err))
			continue
		}
		for _, p := range parseSetPorts(string(out)) {
			nodePorts[flag+" "+p] = true
		}
	}
	if len(s.ipvsAddrs) == 0 && len(nodePorts) == 0 {
		return
	}
	out, err := c.r.Run(ctx, []string{"ipvsadm", "-L", "-n"}, nil)
	if err != nil {
		if isNotFound(err) {
			c.log.Warn("kube-proxy's IPVS state found but ipvsadm is missing; IPVS virtual servers left", "err", err)
			return
		}
		// No IPVS in the kernel: no virtual servers to leave behind.
		c.log.Debug("IPVS not readable; skipped", "err", err)
		return
	}
	for _, v := range parseIPVSList(string(out)) {
		host, port, err := net.SplitHostPort(v.addr)
		if err != nil || v.flag == "-f" {
			continue
		}
		if s.ipvsAddrs[host] || nodePorts[v.flag+" "+port] {
			s.ipvs = append(s.ipvs, v)
		}
	}
}

// ipvsConns is what kube-proxy's virtual servers carry.
func (s *survey) ipvsConns() int {
	n := 0
	for _, v := range s.ipvs {
		n += v.conns
	}
	return n
}

// cleanIPVS deletes kube-proxy's virtual servers (surveyIPVS).
func (c *cleaner) cleanIPVS(ctx context.Context, s survey) ([]string, error) {
	var done []string
	var errs []error
	for _, v := range s.ipvs {
		if _, err := c.r.Run(ctx, []string{"ipvsadm", "-D", v.flag, v.addr}, nil); err != nil {
			errs = append(errs, fmt.Errorf("delete IPVS virtual server %s %s: %w", v.flag, v.addr, err))
			continue
		}
		done = append(done, v.flag+" "+v.addr)
	}
	return done, errors.Join(errs...)
}
