package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// controlPlane holds the credentials and processes of the control
// namespace: etcd, kube-apiserver, kube-controller-manager, kube-scheduler.
type controlPlane struct {
	dir            string
	ca             *authority
	saKey, saPub   string
	bootstrapToken string // "id.secret", in the static token file
	adminKubecfg   string
	kcmKubecfg     string
	schedKubecfg   string
	kubeletCert    string // kube-apiserver's client certificate for kubelets
	kubeletKey     string
	procs          []*launch.Process
}

func (c *Cluster) server() string {
	return "https://" + net.JoinHostPort(APIServerIP.String(), strconv.Itoa(apiServerPort))
}

// writeCredentials creates the cluster CA and every credential the control
// plane and the kubelets' bootstrap need.
func (c *Cluster) writeCredentials() error {
	cp := &c.cp
	cp.dir = filepath.Join(c.cfg.Dir, "control")
	pki := filepath.Join(cp.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	var err error
	if cp.ca, err = newAuthority(pki, "ca"); err != nil {
		return err
	}
	if cp.saKey, cp.saPub, err = writeServiceAccountKey(pki); err != nil {
		return err
	}
	if _, _, err = cp.ca.issue(leaf{name: "apiserver", cn: "kube-apiserver", server: true,
		dns: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + clusterDomain, "localhost"},
		ips: []net.IP{APIServerIP.AsSlice(), KubernetesVIP.AsSlice(), net.IPv4(127, 0, 0, 1)}}); err != nil {
		return err
	}
	if cp.kubeletCert, cp.kubeletKey, err = cp.ca.issue(leaf{name: "apiserver-kubelet-client",
		cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true}); err != nil {
		return err
	}
	// Bootstrap tokens have the form [a-z0-9]{6}.[a-z0-9]{16}; a static
	// token file entry in group system:bootstrappers is enough for the
	// kubelet's TLS bootstrap (no token Secret, no bootstrapsigner).
	cp.bootstrapToken = randomHex(3) + "." + randomHex(8)
	tokens := fmt.Sprintf("%s,kubelet-bootstrap,10001,\"system:bootstrappers\"\n", cp.bootstrapToken)
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	for _, u := range []struct {
		name, cn, org string
		path          *string
	}{
		{"admin", "switchyard-bed-admin", "system:masters", &cp.adminKubecfg},
		{"controller-manager", "system:kube-controller-manager", "", &cp.kcmKubecfg},
		{"scheduler", "system:kube-scheduler", "", &cp.schedKubecfg},
	} {
		var orgs []string
		if u.org != "" {
			orgs = []string{u.org}
		}
		cert, key, err := cp.ca.issue(leaf{name: u.name, cn: u.cn, orgs: orgs, client: true})
		if err != nil {
			return err
		}
		*u.path = filepath.Join(cp.dir, u.name+".kubeconfig")
		if err := writeKubeconfig(*u.path, c.server(), cp.ca.CertFile, credential{certFile: cert, keyFile: key}); err != nil {
			return err
		}
	}
	return nil
}

// startControlPlane starts etcd and kube-apiserver, waits for /readyz, sets
// up the bootstrap RBAC, then starts the controller manager and scheduler.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	cp := &c.cp
	pki := filepath.Join(cp.dir, "pki")
	ns := c.topo.Control().NS
	bin := func(n string) string { return filepath.Join(c.cfg.BinDir, n) }
	etcd := []string{bin("etcd"), "--name=bed", "--data-dir=" + filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=bed=http://127.0.0.1:2380", "--unsafe-no-fsync", "--log-level=warn"}
	if err := c.startIn(ns, "etcd", etcd); err != nil {
		return err
	}
	apiserver := []string{bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--advertise-address=" + APIServerIP.String(),
		"--secure-port=" + strconv.Itoa(apiServerPort),
		"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
		"--client-ca-file=" + cp.ca.CertFile,
		"--token-auth-file=" + filepath.Join(pki, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc." + clusterDomain,
		"--service-account-key-file=" + cp.saPub,
		"--service-account-signing-key-file=" + cp.saKey,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-cluster-ip-range=" + c.cfg.serviceCIDRs(),
		"--kubelet-client-certificate=" + cp.kubeletCert,
		"--kubelet-client-key=" + cp.kubeletKey,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	}
	if err := c.startIn(ns, "kube-apiserver", apiserver); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	if err := c.Apply(ctx, "bootstrap-rbac", bootstrapRBAC); err != nil {
		return err
	}
	kcm := []string{bin("kube-controller-manager"),
		"--kubeconfig=" + cp.kcmKubecfg,
		"--authentication-kubeconfig=" + cp.kcmKubecfg,
		"--authorization-kubeconfig=" + cp.kcmKubecfg,
		"--use-service-account-credentials",
		"--root-ca-file=" + cp.ca.CertFile,
		"--service-account-private-key-file=" + cp.saKey,
		"--cluster-signing-cert-file=" + cp.ca.CertFile,
		"--cluster-signing-key-file=" + cp.ca.KeyFile,
		"--service-cluster-ip-range=" + c.cfg.serviceCIDRs(),
		// Without --allocate-node-cidrs the ranges are not cut into node
		// pod CIDRs (each node's CNI configuration holds its own); they
		// only have to agree with the API server's and the topology's.
		"--cluster-cidr=" + c.cfg.clusterCIDRs(),
		"--leader-elect=false", "--bind-address=127.0.0.1",
	}
	if c.cfg.KubeletCertTTL > 0 {
		kcm = append(kcm, "--cluster-signing-duration="+c.cfg.KubeletCertTTL.String())
	}
	if err := c.startIn(ns, "kube-controller-manager", kcm); err != nil {
		return err
	}
	sched := []string{bin("kube-scheduler"), "--kubeconfig=" + cp.schedKubecfg,
		"--authentication-kubeconfig=" + cp.schedKubecfg, "--authorization-kubeconfig=" + cp.schedKubecfg,
		"--leader-elect=false", "--bind-address=127.0.0.1"}
	return c.startIn(ns, "kube-scheduler", sched)
}

// startIn starts a long-running control-plane process in namespace ns.
func (c *Cluster) startIn(ns, name string, argv []string) error {
	p, err := launch.Start(c.topo.Guard(), launch.Spec{Name: name, Argv: argv, NetNS: "/run/netns/" + ns,
		LogPath: filepath.Join(c.cfg.Dir, "logs", name+".log")})
	if err != nil {
		return err
	}
	c.cp.procs = append(c.cp.procs, p)
	c.log.Info("started", "component", name, "pid", p.Pid())
	return nil
}

// waitAPIServer waits until /readyz answers exactly "ok" (a failing check
// prints "[-]…" lines that also contain "ok").
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	return c.poll(ctx, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		if err := c.checkAlive(); err != nil {
			return false, err
		}
		out, err := c.Kubectl(ctx, "get", "--raw", "/readyz")
		return err == nil && strings.TrimSpace(string(out)) == "ok", nil
	})
}

// checkAlive fails when a control-plane process has exited.
func (c *Cluster) checkAlive() error {
	for _, p := range c.cp.procs {
		if done, err := p.Exited(); done {
			return fmt.Errorf("%w\n--- %s ---\n%s", err, p.LogPath, p.Tail(30))
		}
	}
	return nil
}
