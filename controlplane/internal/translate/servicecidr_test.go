package translate

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func TestServiceCIDR(t *testing.T) {
	sc := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	deleting := sc("old", "10.100.0.0/16")
	deleting.DeletionTimestamp = &metav1.Time{}
	runTranslateCases(t, ServiceCIDR, nil, []translateCase[*networkingv1.ServiceCIDR, model.ServiceCIDR]{
		{
			name: "both families, in spec order",
			in:   sc("kubernetes", "10.96.0.0/16", "fd00:10:96::/112"),
			want: &model.ServiceCIDR{Name: "kubernetes", CIDRs: prefixes("10.96.0.0/16", "fd00:10:96::/112")},
		},
		{
			name: "host bits cleared, legacy IPv4 read as decimal, mapped IPv6 as IPv4",
			in:   sc("extra", "10.97.1.2/16", "::ffff:10.98.0.0/112", "010.099.0.0/16"),
			want: &model.ServiceCIDR{Name: "extra", CIDRs: prefixes("10.97.0.0/16", "10.98.0.0/16", "10.99.0.0/16")},
		},
		{
			name:       "bad and duplicate CIDRs dropped",
			in:         sc("odd", "bogus", "10.96.0.0/33", "10.96.0.0/16", "10.96.0.1/16"),
			want:       &model.ServiceCIDR{Name: "odd", CIDRs: prefixes("10.96.0.0/16")},
			wantCounts: "ServiceCIDR/DuplicateAddress=1 ServiceCIDR/InvalidCIDR=2",
		},
		{
			name: "being deleted: still read, its cluster IPs may still be allocated",
			in:   deleting,
			want: &model.ServiceCIDR{Name: "old", CIDRs: prefixes("10.100.0.0/16")},
		},
		{name: "no cidrs", in: sc("empty"), want: &model.ServiceCIDR{Name: "empty"}},
		{name: "nil", wantSkip: ReasonNilObject, wantCounts: "ServiceCIDR/NilObject=1"},
		{name: "odd name", in: sc("Not_A_Name", "10.96.0.0/16"), wantSkip: ReasonInvalidName, wantCounts: "ServiceCIDR/InvalidName=1"},
	})
}
