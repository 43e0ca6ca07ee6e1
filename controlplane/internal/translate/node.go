package translate

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// Node translates one Node: its name, its zone (label
// topology.kubernetes.io/zone), its labels under model.LabelPrefix and
// its InternalIP then ExternalIP addresses, parsed and deduplicated.
// Other address types are ignored.
func Node(node *corev1.Node, rec Recorder) (*model.Node, error) {
	t, err := clusterTally(rec, KindNode, node)
	if err != nil {
		return nil, err
	}
	out := &model.Node{
		Name: node.Name,
		Zone: node.Labels[corev1.LabelTopologyZone],
	}
	for k, v := range node.Labels {
		if strings.HasPrefix(k, model.LabelPrefix) {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	seen := map[netip.Addr]struct{}{}
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, na := range node.Status.Addresses {
			if na.Type != typ {
				continue
			}
			addr, ok := parseAddr(na.Address)
			if !ok {
				t.drop(ReasonInvalidIP)
				continue
			}
			if _, dup := seen[addr]; dup {
				t.drop(ReasonDuplicateAddress)
				continue
			}
			seen[addr] = struct{}{}
			out.Addresses = append(out.Addresses, addr)
		}
	}
	return out, nil
}
