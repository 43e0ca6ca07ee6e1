package ctl_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/admin"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/adminauth"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// testCA is a servertest.CA whose certificates are files in dir, as
// switchyardctl's flags name them: ca.crt, and name.crt and name.key for
// each certificate issued.
type testCA struct {
	*servertest.CA
	dir string
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	ca := &testCA{CA: servertest.NewCA(t), dir: dir}
	ca.WriteCA(t, dir)
	return ca
}

// issue writes name.crt and name.key into the CA's directory and returns
// the pair.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage, dns []string, orgs ...string) tls.Certificate {
	t.Helper()
	c := ca.Issue(t, servertest.Leaf{CN: name, Orgs: orgs, DNS: dns, Usage: usage})
	servertest.WriteLeaf(t, ca.dir, name, c)
	return c
}

// stubReviewer allows the token "ops" and knows "dev" as a user RBAC
// does not allow, as adminauth's own tests do.
type stubReviewer struct{}

func (stubReviewer) Review(_ context.Context, token, _ string) (string, bool, error) {
	switch token {
	case "ops":
		return "ops@example.com", true, nil
	case "dev":
		return "dev@example.com", false, nil
	}
	return "", false, nil
}

// serveTLS serves AdminService as the control plane does under TLS (its
// certificate names only switchyard.test; adminauth checks operators) on
// loopback TCP and on a unix socket, and returns both addresses.
func serveTLS(t *testing.T, ca *testCA, src admin.Source) (tcp, unix string) {
	t.Helper()
	serverCert := ca.issue(t, "controlplane", x509.ExtKeyUsageServerAuth, []string{"switchyard.test"})
	creds := credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12,
	})
	g := grpc.NewServer(grpc.Creds(creds),
		grpc.UnaryInterceptor(adminauth.New(adminauth.Config{Reviewer: stubReviewer{}}).Unary()))
	switchyardv1.RegisterAdminServiceServer(g, admin.New(src, apiUp{}, flagSettings{}))
	sock := filepath.Join(ca.dir, "cp.sock")
	var lis []net.Listener
	for _, a := range [][2]string{{"tcp", "127.0.0.1:0"}, {"unix", sock}} {
		l, err := net.Listen(a[0], a[1])
		if err != nil {
			t.Fatal(err)
		}
		lis = append(lis, l)
	}
	served := make(chan error, len(lis))
	for _, l := range lis {
		go func() { served <- g.Serve(l) }()
	}
	t.Cleanup(func() {
		g.Stop()
		for range lis {
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	})
	return lis[0].Addr().String(), "unix://" + sock
}

// TestTLS: the agent's TLS flags, --server-name and bearer tokens reach
// the control plane as its adminauth expects.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	c, _ := newFleet(t)
	tcp, unix := serveTLS(t, ca, c)
	ca.issue(t, "operator", x509.ExtKeyUsageClientAuth, nil, adminauth.DefaultGroup)
	ca.issue(t, "system:node:node-a", x509.ExtKeyUsageClientAuth, []string{"node-a"}, "system:nodes")
	other := newTestCA(t, t.TempDir())
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("ops\n"), 0o600); err != nil { // as `kubectl create token > file` leaves it
		t.Fatal(err)
	}
	file := func(name string) string { return filepath.Join(dir, name) }
	tlsFlags := []string{"--server", tcp, "--ca-file", file("ca.crt"), "--server-name", "switchyard.test"}
	with := func(extra ...string) []string { return append(append([]string{}, tlsFlags...), extra...) }
	operator := []string{"--cert-file", file("operator.crt"), "--key-file", file("operator.key")}

	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // regular expression; empty: none
	}{
		{"operator certificate", with(operator...), 0, ""},
		{"operator certificate over a unix socket", append([]string{"--server", unix, "--ca-file", file("ca.crt"), "--server-name", "switchyard.test"}, operator...), 0, ""},
		{"bearer token", with("--token", "ops"), 0, ""},
		{"bearer token from a file", with("--token-file", tokenFile), 0, ""},
		{"token RBAC refuses", with("--token", "dev"), 1, `ListNodes: PermissionDenied: user "dev@example.com" may not get`},
		{"a node's certificate", with("--cert-file", file("system:node:node-a.crt"), "--key-file", file("system:node:node-a.key")), 1,
			`ListNodes: PermissionDenied: AdminService is for operators \(client certificate CN "system:node:node-a"`},
		{"no credential", with(), 1, `PermissionDenied: AdminService is for operators \(no client certificate\)`},
		{"certificate names another host", []string{"--server", tcp, "--ca-file", file("ca.crt"), "--token", "ops"}, 1,
			`ListNodes: Unavailable: .*handshake failed`},
		{"another CA", []string{"--server", tcp, "--ca-file", filepath.Join(other.dir, "ca.crt"), "--server-name", "switchyard.test"}, 1,
			`ListNodes: Unavailable: .*(unknown authority|handshake failed)`},
		{"plaintext to a TLS server", []string{"--server", tcp, "--insecure", "--timeout", "2s"}, 1, `ListNodes: (Unavailable|DeadlineExceeded)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, append(tt.args, "status")...)
			if got.code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", got.code, tt.code, got.stderr)
			}
			if tt.stderr == "" {
				if got.stderr != "" || !strings.Contains(got.stdout, "node-a") {
					t.Errorf("stderr %q, stdout %q; want the status table", got.stderr, got.stdout)
				}
				return
			}
			if !regexp.MustCompile(tt.stderr).MatchString(got.stderr) || strings.Count(got.stderr, "\n") != 1 {
				t.Errorf("stderr %q, want one line matching %q", got.stderr, tt.stderr)
			}
		})
	}
}
