package translate

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/model"
)

func testNode(name string, labels map[string]string, addresses ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{Addresses: addresses},
	}
}

func nodeAddr(typ corev1.NodeAddressType, addr string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: typ, Address: addr}
}

func TestNode(t *testing.T) {
	internal, external := corev1.NodeInternalIP, corev1.NodeExternalIP
	zone := map[string]string{corev1.LabelTopologyZone: "zone-1"}
	runTranslateCases(t, Node, checkNode, []translateCase[*corev1.Node, model.Node]{
		{
			name: "internal before external, whatever the status order",
			in: testNode("node-a.example", zone,
				nodeAddr(external, "203.0.113.5"), nodeAddr(internal, "10.0.0.5"),
				nodeAddr(corev1.NodeHostName, "node-a"), nodeAddr(internal, "2001:db8::0005")),
			want: &model.Node{Name: "node-a.example", Zone: "zone-1", Addresses: addrs("10.0.0.5", "2001:db8::5", "203.0.113.5")},
		},
		{
			name: "no zone label, no addresses",
			in:   testNode("node-b", map[string]string{"failure-domain.beta.kubernetes.io/zone": "old"}),
			want: &model.Node{Name: "node-b"},
		},
		{
			name:       "invalid and duplicate addresses dropped, mapped and legacy normalised",
			in:         testNode("node-c", nil, nodeAddr(internal, "10.0.0.300"), nodeAddr(internal, "::ffff:10.0.0.6"), nodeAddr(external, "010.0.0.6"), nodeAddr(external, "")),
			want:       &model.Node{Name: "node-c", Addresses: addrs("10.0.0.6")},
			wantCounts: "Node/DuplicateAddress=1 Node/InvalidIP=2",
		},
		{
			name: "other address types ignored",
			in:   testNode("node-d", nil, nodeAddr(corev1.NodeInternalDNS, "node-d.internal"), nodeAddr(corev1.NodeExternalDNS, "x")),
			want: &model.Node{Name: "node-d"},
		},
		{name: "nil", wantSkip: ReasonNilObject, wantCounts: "Node/NilObject=1"},
		{name: "empty name", in: testNode("", nil), wantSkip: ReasonInvalidName, wantCounts: "Node/InvalidName=1"},
		{name: "odd name", in: testNode("Node A", nil), wantSkip: ReasonInvalidName, wantCounts: "Node/InvalidName=1"},
	})
}
