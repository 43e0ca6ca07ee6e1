package iptables

import (
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/dataplane/dptest"
)

// TestFamilyTraffic sends real traffic through the rules this mode
// programs, over IPv4 on an IPv4-only bed and over IPv6 on a dual-stack
// bed, where iptables and ip6tables are both programmed: ClusterIP and
// NodePort, affinity, ETP Local, refusal without endpoints, UDP
// conntrack cleanup, a dual-stack service (dptest.RunFamilyChecks).
func TestFamilyTraffic(t *testing.T) {
	dptest.RunFamilyChecks(t, modeBed)
}
