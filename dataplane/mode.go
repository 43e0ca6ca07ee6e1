package dataplane

import (
	"strings"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// ModeName is mode as the agent's --mode flag spells it ("iptables",
// "dry-run"), which is also how kube-proxy's /proxyMode names its modes;
// "" when unspecified, and the number of a mode this build does not know.
func ModeName(m switchyardv1.DataplaneMode) string {
	if m == switchyardv1.DataplaneMode_DATAPLANE_MODE_UNSPECIFIED {
		return ""
	}
	name := strings.TrimPrefix(m.String(), "DATAPLANE_MODE_")
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}
