package system_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// subscribe opens a DeltaSnapshots stream to the control plane over mTLS
// with cert (none when nil), asks for node's view and returns the status
// of the first answer (OK when a response arrived).
func (e *env) subscribe(ctx context.Context, cert *tls.Certificate, node string) (codes.Code, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(e.c.Target, grpc.WithTransportCredentials(credentials.NewTLS(e.c.PKI.ClientTLS(cert))))
	if err != nil {
		return codes.Unknown, err
	}
	defer conn.Close()
	st, err := switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(ctx)
	if err != nil {
		return status.Code(err), err
	}
	if err := st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: node, AgentVersion: "e2e-impostor"}}); err != nil {
		_, err = st.Recv()
		return status.Code(err), err
	}
	_, err = st.Recv()
	return status.Code(err), err
}

// testNodeIdentity: the tiers talk mTLS (the agents in this cluster got
// certificates for their own node and are settled). A client holding node-0's
// certificate cannot subscribe as node-1, one whose certificate names no
// node cannot subscribe at all, one without a certificate cannot even
// connect, and the real agents' streams are left alone.
func testNodeIdentity(t *testing.T, e *env) {
	ctx := t.Context()
	n0, n1 := e.c.Topo.Node(0).Name, e.c.Topo.Node(1).Name
	before, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node0, err := e.c.PKI.NodeCert(n0)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := e.c.PKI.ClientCert("switchyard-e2e-admin")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		as   string
		want codes.Code
	}{
		{"node-0's certificate as node-1", &node0, n1, codes.PermissionDenied},
		{"a certificate naming no node as node-0", &admin, n0, codes.PermissionDenied},
		{"no client certificate as node-0", nil, n0, codes.Unavailable},
	} {
		code, err := e.subscribe(ctx, tc.cert, tc.as)
		t.Logf("%s: %v", tc.name, err)
		if code != tc.want {
			t.Errorf("%s: got %v (%v), want %v", tc.name, code, err, tc.want)
		}
	}
	after, err := e.nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{n0, n1} {
		b, a := before[name].GetConnectedSince().AsTime(), after[name].GetConnectedSince().AsTime()
		if !a.Equal(b) || !after[name].GetConnected() {
			t.Errorf("%s's agent stream was disturbed: connected %t, since %v, was %v", name, after[name].GetConnected(), a, b)
		}
	}
	e.settled(t, "node-identity")
}

// adminCall calls ListNodes and GetNodeView(node) over mTLS with cert
// (none when nil) and, unless empty, a bearer token; it returns both
// codes.
func (e *env) adminCall(ctx context.Context, cert *tls.Certificate, token, node string) (codes.Code, codes.Code, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient(e.c.Target, grpc.WithTransportCredentials(credentials.NewTLS(e.c.PKI.ClientTLS(cert))))
	if err != nil {
		return codes.Unknown, codes.Unknown, err
	}
	defer conn.Close()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	admin := switchyardv1.NewAdminServiceClient(conn)
	_, lerr := admin.ListNodes(ctx, &switchyardv1.ListNodesRequest{})
	_, verr := admin.GetNodeView(ctx, &switchyardv1.GetNodeViewRequest{NodeName: node})
	return status.Code(lerr), status.Code(verr), errors.Join(lerr, verr)
}

// testAdminIdentity: AdminService shows every node's view, so a node's
// certificate (the kubelet's, which the agents use) gets PermissionDenied
// on it; an operator certificate (O=switchyard:admins) is served, and so is
// a Kubernetes token whose user RBAC lets get the method's non-resource
// URL — per method: a role granting only ListNodes does not get
// GetNodeView.
func testAdminIdentity(t *testing.T, e *env) {
	ctx := t.Context()
	n0, n1 := e.c.Topo.Node(0).Name, e.c.Topo.Node(1).Name
	node0, err := e.c.PKI.NodeCert(n0)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := e.c.PKI.OperatorCert("alice")
	if err != nil {
		t.Fatal(err)
	}
	cs := e.c.API.Client()
	const ns = "admin-rbac"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		cfg, err := e.c.API.ServiceAccountConfig(ctx, ns, sa)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.BearerToken
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-e2e-list-nodes"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/switchyard.v1.AdminService/ListNodes"}, Verbs: []string{"get"}}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "switchyard-e2e-list-nodes"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "ops"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ops, nobody := token("ops"), token("nobody")
	for _, tc := range []struct {
		name       string
		cert       *tls.Certificate
		token      string
		list, view codes.Code
	}{
		{"node-0's certificate", &node0, "", codes.PermissionDenied, codes.PermissionDenied},
		{"operator certificate", &operator, "", codes.OK, codes.OK},
		{"node-0's certificate with a token bound to ListNodes", &node0, ops, codes.OK, codes.PermissionDenied},
		{"token of an unbound service account", &node0, nobody, codes.PermissionDenied, codes.PermissionDenied},
		{"forged token", &node0, "not-a-token", codes.PermissionDenied, codes.PermissionDenied},
	} {
		list, view, err := e.adminCall(ctx, tc.cert, tc.token, n1)
		t.Logf("%s: ListNodes %v, GetNodeView(%s) %v: %v", tc.name, list, n1, view, err)
		if list != tc.list || view != tc.view {
			t.Errorf("%s: ListNodes %v, GetNodeView %v; want %v, %v", tc.name, list, view, tc.list, tc.view)
		}
	}
}
