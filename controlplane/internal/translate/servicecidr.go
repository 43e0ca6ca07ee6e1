package translate

import (
	"slices"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

// ServiceCIDR translates one ServiceCIDR (networking.k8s.io/v1): its
// name and spec.cidrs, parsed as the API server's sloppy parser does,
// masked and deduplicated (the API allows two, one per family). Neither
// its status nor a deletion in progress is read: kube-proxy programs
// every object's spec.cidrs until the object is gone, since cluster IPs
// of a range being deleted may still be allocated.
func ServiceCIDR(obj *networkingv1.ServiceCIDR, rec Recorder) (*model.ServiceCIDR, error) {
	t, err := clusterTally(rec, KindServiceCIDR, obj)
	if err != nil {
		return nil, err
	}
	out := &model.ServiceCIDR{Name: obj.Name}
	for _, raw := range obj.Spec.CIDRs {
		p, ok := parsePrefix(raw)
		switch {
		case !ok:
			t.drop(ReasonInvalidCIDR)
		case slices.Contains(out.CIDRs, p):
			t.drop(ReasonDuplicateAddress)
		default:
			out.CIDRs = append(out.CIDRs, p)
		}
	}
	return out, nil
}
