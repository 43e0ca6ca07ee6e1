package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchyard-proxy/switchyard/e2e/cluster/images"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/apiserver"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// Switchyard's install as the bed applies it: e2e/cluster/overlays/<Overlay>.
const (
	// OverlayBase is deploy/ as shipped: mTLS from the control plane's own
	// CA, agents presenting their kubelet's client certificate.
	OverlayBase = "base"
	// OverlayPlaintext is deploy/overlays/plaintext, the lab install.
	OverlayPlaintext = "plaintext"
	// OverlayMTLS is deploy/overlays/mtls: cert-manager's certificates
	// (the test creates the Secrets cert-manager would).
	OverlayMTLS = "mtls"
	// OverlayKubeSystem is the base in kube-system with the agents
	// labelled k8s-app=kube-proxy, for upstream specs that restart kube-proxy.
	OverlayKubeSystem = "kube-system"
	// SystemNS is deploy/'s namespace.
	SystemNS = "switchyard-system"
	// GRPCPort is the control plane's port on its node's address.
	GRPCPort = 18000
)

// InstallSwitchyard applies the overlay with kubectl apply -k. For the mTLS
// overlay it first creates the Secrets cert-manager would: a server
// certificate from a test CA for every name and node address agents dial,
// and that CA for agents. The other TLS installs issue their own
// (WaitSwitchyard reads the CA they publish).
// mode is the agents' dataplane mode ("" or iptables as deploy/ ships it,
// nftables, userspace, ipvs).
func (c *Cluster) InstallSwitchyard(ctx context.Context, overlay, mode string) error {
	src, err := ThisSource()
	if err != nil {
		return err
	}
	return c.InstallSwitchyardFrom(ctx, src, overlay, mode)
}

// Source is the Switchyard an install applies: a checkout of this
// repository, whose deploy/ the bed applies through that checkout's own
// e2e/cluster/overlays, and the tag of the images built from it (which
// must be among Config.Images).
type Source struct {
	Root string // the checkout's top directory
	Tag  string // its controlplane and agent images' tag
}

// ThisSource is this checkout with the images Start builds from it.
func ThisSource() (Source, error) {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return Source{}, err
	}
	return Source{Root: root, Tag: ImageTag}, nil
}

// InstallSwitchyardFrom is InstallSwitchyard from src. Installing
// another Source over a running install is what an operator's upgrade or
// downgrade is: kubectl apply of the other version's manifests, which
// rolls the DaemonSet and the Deployment.
func (c *Cluster) InstallSwitchyardFrom(ctx context.Context, src Source, overlay, mode string) error {
	c.swydNS = SystemNS
	if overlay == OverlayKubeSystem {
		c.swydNS = "kube-system"
	}
	if _, err := c.Kubectl(ctx, "create", "namespace", c.swydNS); err != nil {
		if _, gerr := c.Kubectl(ctx, "get", "namespace", c.swydNS); gerr != nil {
			return err
		}
	}
	c.swydTLS, c.swydCAPEM, c.swydCA = overlay != OverlayPlaintext, nil, nil
	if overlay == OverlayMTLS {
		if err := c.createTLSSecrets(ctx); err != nil {
			return err
		}
	}
	dir := filepath.Join(src.Root, "e2e", "cluster", "overlays", overlay)
	iptables := mode == "" || mode == "iptables"
	name := "switchyard-" + overlay + "-" + mode
	if iptables {
		name = "switchyard-" + overlay + "-iptables"
	}
	if src.Tag != ImageTag {
		name += "-" + src.Tag
	}
	// The overlays name ImageTag; another tag, or the node setup of a
	// mode that has one (deploy/components/<mode>), is an operator's own
	// kustomization over the overlay.
	if component := modeComponent(src, mode); component != "" || src.Tag != ImageTag {
		var err error
		if dir, err = c.wrapOverlay(src, dir, name, component); err != nil {
			return fmt.Errorf("install switchyard (%s): %w", overlay, err)
		}
	}
	if iptables && !c.cfg.DualStack {
		if _, err := c.Kubectl(ctx, "apply", "-k", dir); err != nil {
			return fmt.Errorf("install switchyard (%s): %w", overlay, err)
		}
		return nil
	}
	rendered, err := c.Kubectl(ctx, "kustomize", dir)
	if err != nil {
		return fmt.Errorf("install switchyard (%s): %w", overlay, err)
	}
	manifest := string(rendered)
	// Another mode: what an operator does, the agent ConfigMap's mode line
	// changed before the DaemonSet starts.
	if !iptables {
		if manifest, err = replaceOnce(manifest, "\n    mode: iptables\n", "\n    mode: "+mode+"\n"); err != nil {
			return fmt.Errorf("install switchyard (%s): the agent config: %w", overlay, err)
		}
	}
	// Dual-stack: the control plane is told both pod CIDRs, as an
	// operator's kustomization would, so that IPv6 service traffic from
	// outside the IPv6 pod range is masqueraded like IPv4's.
	if c.cfg.DualStack {
		if manifest, err = replaceOnce(manifest, "--cluster-cidr="+ClusterCIDR.String()+"\n",
			"--cluster-cidr="+c.cfg.clusterCIDRs()+"\n"); err != nil {
			return fmt.Errorf("install switchyard (%s): the control plane's arguments: %w", overlay, err)
		}
		name += "-dualstack"
	}
	return c.Apply(ctx, name, manifest)
}

// UninstallSwitchyard deletes what InstallSwitchyard applied from
// overlay (the same objects whatever the mode), as an operator
// does with kubectl delete -k, and waits for them to be gone. The agents'
// rules stay, as with any DaemonSet deleted.
func (c *Cluster) UninstallSwitchyard(ctx context.Context, overlay string) error {
	root, err := apiserver.RepoRoot()
	if err != nil {
		return err
	}
	dir := filepath.Join(root, "e2e", "cluster", "overlays", overlay)
	if _, err := c.Kubectl(ctx, "delete", "-k", dir, "--ignore-not-found", "--wait=true", "--timeout=3m"); err != nil {
		return fmt.Errorf("uninstall switchyard (%s): %w", overlay, err)
	}
	return nil
}

// replaceOnce replaces old in s, which must hold it exactly once: a
// rendered install that changed shape fails loudly instead of silently
// keeping the old value.
func replaceOnce(s, old, new string) (string, error) {
	if n := strings.Count(s, old); n != 1 {
		return "", fmt.Errorf("%d occurrences of %q, want 1", n, strings.TrimSpace(old))
	}
	return strings.Replace(s, old, new, 1), nil
}

func (c *Cluster) createTLSSecrets(ctx context.Context) error {
	dir := filepath.Join(c.cfg.Dir, "switchyard-pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := newAuthority(dir, "switchyard-ca")
	if err != nil {
		return err
	}
	if c.swydCAPEM, err = os.ReadFile(ca.CertFile); err != nil {
		return err
	}
	c.swydCA = ca
	cert, key, err := c.RenewControlPlaneCert()
	if err != nil {
		return err
	}
	for _, args := range [][]string{
		{"create", "secret", "tls", "switchyard-controlplane-tls", "--cert=" + cert, "--key=" + key},
		{"create", "secret", "generic", "switchyard-ca-bundle", "--from-file=ca.crt=" + ca.CertFile},
	} {
		out, err := c.Kubectl(ctx, append(append(args, "-n", SystemNS), "--dry-run=client", "-o", "yaml")...)
		if err != nil {
			return err
		}
		if err := c.Apply(ctx, args[3], string(out)); err != nil {
			return err
		}
	}
	return nil
}

// RenewControlPlaneCert issues, from the mTLS overlay's test CA, a new
// serving certificate (new key, new serial, the same names and node
// addresses) and returns its files: what cert-manager writes into the
// Secret switchyard-controlplane-tls when it renews the Certificate.
func (c *Cluster) RenewControlPlaneCert() (certFile, keyFile string, err error) {
	if c.swydCA == nil {
		return "", "", fmt.Errorf("no test CA: the mTLS overlay is not installed")
	}
	dns := []string{"switchyard-controlplane", "switchyard-controlplane." + SystemNS,
		"switchyard-controlplane." + SystemNS + ".svc", "switchyard-controlplane." + SystemNS + ".svc." + clusterDomain}
	var ips []net.IP
	for i := range MaxNodes {
		ips = append(ips, NodeIP(i).AsSlice())
	}
	// A file name of its own: the Secret's earlier version stays on disk.
	return c.swydCA.issue(leaf{name: "controlplane-" + randomHex(4), cn: "switchyard-controlplane", dns: dns, ips: ips, server: true})
}

// InstallWithDNS deploys CoreDNS (the pinned version) and Switchyard from
// overlay in mode, then waits until every Switchyard pod is Ready, every
// agent acked and CoreDNS is Ready: it lists Services through the
// kubernetes VIP that only the proxy programs.
func (c *Cluster) InstallWithDNS(ctx context.Context, overlay, mode string) error {
	if err := c.InstallPinnedDNS(ctx); err != nil {
		return err
	}
	if err := c.InstallSwitchyard(ctx, overlay, mode); err != nil {
		return err
	}
	if err := c.WaitSwitchyard(ctx); err != nil {
		return err
	}
	if _, err := c.WaitSettled(ctx); err != nil {
		return err
	}
	return c.WaitDNS(ctx)
}

// SwitchyardNS is the namespace Switchyard was installed in.
func (c *Cluster) SwitchyardNS() string {
	if c.swydNS == "" {
		return SystemNS
	}
	return c.swydNS
}

// WaitSwitchyard waits until the DaemonSet and the Deployment are rolled
// out with every pod Ready; for an install that issues its own
// certificates it then reads the CA bundle the control plane published
// (ReadCABundle).
func (c *Cluster) WaitSwitchyard(ctx context.Context) error {
	for _, obj := range []string{"daemonset/switchyard-agent", "deployment/switchyard-controlplane"} {
		if _, err := c.Kubectl(ctx, "-n", c.SwitchyardNS(), "rollout", "status", obj, "--timeout=5m"); err != nil {
			return err
		}
	}
	return c.ReadCABundle(ctx)
}

// ReadCABundle reads the CA bundle the control plane published, for an
// install that issues its own certificates and whose CA is not known yet;
// AdminConn and Settled need it. WaitSwitchyard calls it; a test that
// holds a rollout (a paused Deployment, which WaitSwitchyard would wait
// for) calls it itself once the replicas run.
func (c *Cluster) ReadCABundle(ctx context.Context) error {
	if c.swydTLS && c.swydCAPEM == nil {
		return c.ReadControlPlaneCA(ctx)
	}
	return nil
}

// ReadControlPlaneCA reads again the CA bundle the base's control plane
// published (WaitSwitchyard reads it once), for AdminConn and Settled
// after an operator changed it: during a CA rotation, serving
// certificates from the new CA are verified only with the new bundle.
func (c *Cluster) ReadControlPlaneCA(ctx context.Context) error {
	if !c.swydTLS || c.swydCA != nil {
		return fmt.Errorf("the install does not publish its CA (plaintext, or the mTLS overlay's test CA)")
	}
	out, err := c.Kubectl(ctx, "-n", c.SwitchyardNS(), "get", "configmap", CABundle, "-o", `jsonpath={.data.ca\.crt}`)
	if err != nil {
		return fmt.Errorf("the control plane's CA bundle: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(out) {
		return fmt.Errorf("the control plane's CA bundle holds no certificate: %q", out)
	}
	c.swydCAPEM = out
	return nil
}

// CABundle is the ConfigMap the base's control plane publishes its CA in
// (--ca-bundle-configmap in deploy/base/controlplane.yaml).
const CABundle = "switchyard-ca-bundle"

// AdminCredentials writes what an operator's grpcurl needs against the
// install: the CA the control plane's certificate chains to, and an
// operator client certificate (O switchyard:admins, the control plane's
// --admin-group) from the cluster CA, which the control plane trusts for
// clients (--client-ca-file: kube-root-ca.crt). A node's certificate is
// refused on AdminService. Empty paths for a plaintext install.
func (c *Cluster) AdminCredentials() (caFile, certFile, keyFile string, err error) {
	if !c.swydTLS {
		return "", "", "", nil
	}
	if c.swydCAPEM == nil {
		return "", "", "", fmt.Errorf("the install's CA is not known yet: WaitSwitchyard first")
	}
	dir := filepath.Join(c.cfg.Dir, "switchyard-pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", "", err
	}
	caFile = filepath.Join(dir, "controlplane-ca.crt")
	if err := os.WriteFile(caFile, c.swydCAPEM, 0o600); err != nil {
		return "", "", "", err
	}
	certFile, keyFile, err = c.cp.ca.issue(leaf{name: "admin-client", cn: "switchyard-e2e-admin",
		orgs: []string{"switchyard:admins"}, client: true})
	return caFile, certFile, keyFile, err
}

// AdminConn dials the control-plane replica on node i from inside the
// client namespace, with AdminCredentials under TLS.
func (c *Cluster) AdminConn(i int) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	caFile, certFile, keyFile, err := c.AdminCredentials()
	if err != nil {
		return nil, err
	}
	if caFile != "" {
		if creds, err = clientTLS(caFile, certFile, keyFile); err != nil {
			return nil, err
		}
	}
	return c.DialControlPlane(i, creds)
}

// ControlPlaneCA is the CA the install's server certificates chain to;
// nil for a plaintext install or before WaitSwitchyard.
func (c *Cluster) ControlPlaneCA() []byte { return c.swydCAPEM }

// KubeletClientCert is the path, in this process's mount namespace, of
// node i's kubelet client certificate and key (one PEM file), the
// credential its agent presents. The kubelet's current.pem is a symlink
// to an absolute path inside the node's own /var, so it is resolved here.
func (c *Cluster) KubeletClientCert(i int) (string, error) {
	nodeVar := filepath.Join(c.nodes[i].dir, "var")
	link := filepath.Join(nodeVar, "lib", "kubelet", "pki", "kubelet-client-current.pem")
	target, err := os.Readlink(link)
	if err != nil {
		return "", fmt.Errorf("node %d's kubelet client certificate: %w", i, err)
	}
	if rest, ok := strings.CutPrefix(target, "/var/"); ok {
		return filepath.Join(nodeVar, rest), nil
	}
	if !filepath.IsAbs(target) {
		return filepath.Join(filepath.Dir(link), target), nil
	}
	return "", fmt.Errorf("node %d's kubelet client certificate points outside /var: %s", i, target)
}

// DialControlPlane dials the replica on node i from the client namespace.
func (c *Cluster) DialControlPlane(i int, creds credentials.TransportCredentials) (*grpc.ClientConn, error) {
	target := net.JoinHostPort(NodeIP(i).String(), strconv.Itoa(GRPCPort))
	return grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(c.DialContext))
}

// clientTLS verifies the server with caFile and presents certFile/keyFile
// (none when certFile is empty).
func clientTLS(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}

// DialContext dials addr from a socket created inside the client namespace:
// a dial from this process's own namespace would leave the machine.
func (c *Cluster) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	return c.dialIn(ctx, c.ClientNS(), addr)
}

// NodeDialContext dials addr from a socket created inside node i's
// network namespace, as a hostNetwork pod would: 127.0.0.1 is the node's
// own loopback (where the agent serves /metrics).
func (c *Cluster) NodeDialContext(ctx context.Context, i int, addr string) (net.Conn, error) {
	return c.dialIn(ctx, c.nodes[i].ns, addr)
}

// dialIn opens a TCP connection from a socket created in namespace ns;
// the socket stays there whichever thread uses it afterwards.
func (c *Cluster) dialIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	var conn net.Conn
	var dialErr error
	err := c.topo.Do(ns, func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		conn, dialErr = d.DialContext(ctx, "tcp", addr)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return conn, dialErr
}

// Settled reports whether every node is connected to some replica and has
// acked the version that replica wants for it; it asks every replica.
func (c *Cluster) Settled(ctx context.Context) (bool, []*switchyardv1.NodeStatus, error) {
	acked := map[string]bool{}
	var all []*switchyardv1.NodeStatus
	for i := range c.nodes {
		conn, err := c.AdminConn(i)
		if err != nil {
			return false, nil, err
		}
		resp, err := switchyardv1.NewAdminServiceClient(conn).ListNodes(ctx, &switchyardv1.ListNodesRequest{})
		conn.Close()
		if err != nil {
			continue // no replica on this node
		}
		for _, n := range resp.GetNodes() {
			if n.GetConnected() {
				all = append(all, n)
				if n.GetDesiredVersion() != "" && n.GetAckedVersion() == n.GetDesiredVersion() {
					acked[n.GetName()] = true
				}
			}
		}
	}
	for i := range c.nodes {
		if !acked[NodeName(i)] {
			return false, all, nil
		}
	}
	return true, all, nil
}

// WaitSettled polls Settled until it holds. An error of Settled ends it:
// only the credentials fail there (a replica that does not answer is
// skipped), and they would fail forever.
func (c *Cluster) WaitSettled(ctx context.Context) ([]*switchyardv1.NodeStatus, error) {
	var last []*switchyardv1.NodeStatus
	err := c.poll(ctx, "every agent acked", func(ctx context.Context) (bool, error) {
		ok, nodes, err := c.Settled(ctx)
		last = nodes
		return ok, err
	})
	return last, err
}

// wrapOverlay writes a kustomization over overlay, as an operator's own
// would, and returns its directory: it sets src's image tag and adds
// component, when set (a mode's node setup, modeComponent), whose init
// container gets the agent's image.
func (c *Cluster) wrapOverlay(src Source, overlay, name, component string) (string, error) {
	dir := filepath.Join(c.cfg.Dir, "manifests", name+"-kustomization")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// kustomize takes only relative paths to other kustomizations.
	res, err := filepath.Rel(dir, overlay)
	if err != nil {
		return "", err
	}
	comps := "[]"
	if component != "" {
		comp, err := filepath.Rel(dir, component)
		if err != nil {
			return "", err
		}
		comps = fmt.Sprintf("[%q]", comp)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%q]
components: %s
images:
  - {name: %s, newTag: %s}
  - {name: %s, newTag: %s}
`, res, comps, images.ControlPlaneRepo, src.Tag, images.AgentRepo, src.Tag)
	return dir, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// modeComponent is src's deploy/components/<mode>, the node setup a mode
// needs before its agent starts (userspace: the service range as a local
// route; ipvs: its sysctls), or "" for a mode without one.
func modeComponent(src Source, mode string) string {
	if mode == "" {
		return ""
	}
	dir := filepath.Join(src.Root, "deploy", "components", mode)
	if _, err := os.Stat(filepath.Join(dir, "kustomization.yaml")); err != nil {
		return ""
	}
	return dir
}
