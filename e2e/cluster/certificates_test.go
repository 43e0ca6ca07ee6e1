package cluster_test

import (
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/internal/checkout"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/probe"
)

const (
	certsNS = "certs"
	// kubeletCertTTL is the lifetime of the kubelets' client certificates
	// on the first bed: with the signer's 5 minutes of backdating, each
	// kubelet renews 0.6 to 2.2 minutes after it got one.
	kubeletCertTTL = cluster.MinKubeletCertTTL
	// day2Env selects the long variant: no kubelet is made to sync a pod,
	// every wait is as long as the kubelet makes it.
	day2Env = "SWITCHYARD_DAY2"
)

// certBed is a bed with Switchyard installed from one overlay and the
// hand-over test's workload (handover_traffic_test.go), whose traffic
// runs through every phase.
type certBed struct {
	holdTarget
	day2 bool
	// volumeWait bounds how long a changed ConfigMap or Secret takes to
	// reach the pods that mount it and be loaded by them.
	volumeWait time.Duration
}

// TestRealClusterCertificates shows, on real kubelets and under traffic
// (new connections pod → ClusterIP and node → NodePort, 20 long-lived
// connections, a UDP flow), that certificates change without a failed
// connection or a restart, as README "Rotating certificates" says:
//
//   - kubelet-rotation: each kubelet renews its client certificate (the
//     first bed signs them for kubeletCertTTL); each agent loads it and
//     reconnects once per renewal, at the first attempt;
//   - serving-renewal: with the mTLS overlay, the Secret
//     switchyard-controlplane-tls replaced by a renewed certificate of the
//     same CA is served by every replica, which is not restarted;
//   - ca-rotation: on the base install, README example "ca-rotation" run
//     step by step with the bed's kubectl, waiting after each "Then wait"
//     until every agent loaded the bundle; the replicas end up serving
//     from the new CA, the agents trust it alone and, after one more
//     restart of the replicas, reconnect with it at the first attempt.
//
// Each phase ends with every agent acked. A kubelet writes a changed
// ConfigMap or Secret into a pod's volume at its next sync of the pod
// (about a minute, plus jitter): by default the test annotates the pods
// to have the kubelet sync them at once; SWITCHYARD_DAY2=1 waits for the
// kubelet instead, as an operator does.
func TestRealClusterCertificates(t *testing.T) {
	day2 := os.Getenv(day2Env) == "1"
	if !day2 {
		t.Logf("%s unset: after each Secret or ConfigMap change the Switchyard pods are annotated so that their kubelet "+
			"syncs their volumes at once; %s=1 runs the long variant that waits for the kubelet's own sync", day2Env, day2Env)
	}
	t.Run("mtls", func(t *testing.T) {
		b := startCertBed(t, cluster.Config{Nodes: 2, KubeletCertTTL: kubeletCertTTL}, cluster.OverlayMTLS, day2)
		phase(t, "kubelet-rotation", func(t *testing.T) { kubeletRotation(t, b) })
		phase(t, "serving-renewal", func(t *testing.T) { servingRenewal(t, b) })
	})
	t.Run("base", func(t *testing.T) {
		b := startCertBed(t, cluster.Config{Nodes: 2}, cluster.OverlayBase, day2)
		phase(t, "ca-rotation", func(t *testing.T) { caRotation(t, b) })
	})
}

func phase(t *testing.T, name string, run func(*testing.T)) {
	began := time.Now()
	ok := t.Run(name, run)
	t.Logf("phase %s: ok=%t in %v", name, ok, time.Since(began).Round(time.Millisecond))
}

func startCertBed(t *testing.T, cfg cluster.Config, overlay string, day2 bool) *certBed {
	c := cluster.Start(t, cfg)
	ctx := t.Context()
	begin := time.Now()
	installSwitchyard(t, c, overlay, "")
	settled(t, c)
	t.Logf("switchyard (%s) installed and settled %v after install", overlay, time.Since(begin).Round(time.Millisecond))
	b := &certBed{holdTarget: startHold(t, c, certsNS), day2: day2, volumeWait: time.Minute}
	if day2 {
		// README: the kubelet's sync period plus its cache TTL, "a
		// minute or two", then the agents look within 10 s.
		b.volumeWait = 3 * time.Minute
	}
	node1 := probe.New(c.Topology(), c.NodeNS(1))
	waitFor(t, "the agents program the ClusterIP and the NodePort", time.Minute, func() (bool, error) {
		if err := dialFrom(b.pod, netip.AddrPortFrom(b.vip, holdNew)); err != nil {
			return false, err
		}
		res, err := node1.TCP(ctx, b.np, probe.Options{Count: 3, Timeout: time.Second})
		return err == nil && res.Succeeded() == 3, err
	})
	t.Logf("bed ready %v after install", time.Since(begin).Round(time.Millisecond))
	return b
}

// settleAndCheck ends a phase: every agent acked, the traffic ran a
// little longer over the final state and lost nothing, and no agent
// connected other than as allowed.
func (b *certBed) settleAndCheck(t *testing.T, what string, traffic *holdTraffic, since time.Time, maxOpens func(streamAccount) int) {
	t.Helper()
	settled(t, b.c)
	time.Sleep(2 * time.Second) // traffic over the settled state, not a wait for a condition
	traffic.check(t, what, true)
	checkStreams(t, what, agentStreams(t, b.c, since), maxOpens)
}

// kubeletRotation: every kubelet renews its client certificate during
// the phase (a new serial in kubelet-client-current.pem); every agent
// loads it and opens one new stream per renewal, to present it, at the
// first attempt, with nothing restarted and no connection lost.
func kubeletRotation(t *testing.T, b *certBed) {
	c := b.c
	agents, replicas := switchyardPods(t, c, agentApp), switchyardPods(t, c, controlPlaneApp)
	began := time.Now()
	n := c.Nodes()
	before := make([]*big.Int, n)
	okBefore, failedBefore := make([]float64, n), make([]float64, n)
	serials := make([]map[string]bool, n) // the new ones seen
	for i := range n {
		cert := kubeletCert(t, c, i)
		before[i], serials[i] = cert.SerialNumber, map[string]bool{}
		okBefore[i] = reloads(t, c, i, agentMetricsPort, agentClientCertFile, "ok")
		failedBefore[i] = reloads(t, c, i, agentMetricsPort, agentClientCertFile, "failed")
		t.Logf("%s: kubelet client certificate serial %x, valid %v (until %s)", cluster.NodeName(i), cert.SerialNumber,
			cert.NotAfter.Sub(cert.NotBefore), cert.NotAfter.Format("15:04:05"))
	}
	traffic := b.traffic(t)
	renewed, loaded := make([]time.Duration, n), make([]time.Duration, n)
	lookAll := func() bool {
		done := true
		for i := range n {
			cert := kubeletCert(t, c, i)
			if cert.SerialNumber.Cmp(before[i]) != 0 {
				serials[i][cert.SerialNumber.Text(16)] = true
				if renewed[i] == 0 {
					renewed[i] = time.Since(began)
				}
			}
			if renewed[i] != 0 && loaded[i] == 0 && reloads(t, c, i, agentMetricsPort, agentClientCertFile, "ok") > okBefore[i] {
				loaded[i] = time.Since(began)
			}
			done = done && loaded[i] != 0
		}
		return done
	}
	// Up to a whole lifetime: the renewal is due at 70–90 % of it.
	waitFor(t, "every kubelet renewed its client certificate and its agent loaded it", kubeletCertTTL+time.Minute,
		func() (bool, error) { return lookAll(), nil })
	// AdminService shows the new stream (the agent looks at its files
	// every 10 s).
	waitFor(t, "every agent connected anew in the phase", time.Minute, func() (bool, error) {
		_, nodes, err := c.Settled(t.Context())
		since := map[string]time.Time{}
		for _, s := range nodes {
			since[s.GetName()] = s.GetConnectedSince().AsTime()
		}
		for i := range n {
			if !since[cluster.NodeName(i)].After(began) {
				return false, err
			}
		}
		return true, err
	})
	lookAll()
	for i := range n {
		cert := kubeletCert(t, c, i)
		t.Logf("%s: kubelet renewed its client certificate %v into the phase (now serial %x, valid %v), agent loaded it %v in; %d new certificates in the phase",
			cluster.NodeName(i), renewed[i].Round(time.Second), cert.SerialNumber, cert.NotAfter.Sub(cert.NotBefore), loaded[i].Round(time.Second), len(serials[i]))
		if got := reloads(t, c, i, agentMetricsPort, agentClientCertFile, "failed"); got != failedBefore[i] {
			t.Errorf("%s: the agent failed to load %v versions of %s", cluster.NodeName(i), got-failedBefore[i], agentClientCertFile)
		}
	}
	b.settleAndCheck(t, "kubelet rotation", traffic, began, func(a streamAccount) int {
		// One reconnect per renewal the agent saw, no other.
		return a.Rotations
	})
	streams := agentStreams(t, c, began)
	for i := range n {
		a := streams[cluster.NodeName(i)]
		// A renewal just before the phase may be presented in it: the
		// certificates the agent reconnected for are named by their end
		// of validity, each at most once.
		distinct := map[string]bool{}
		for _, na := range a.RotatedTo {
			distinct[na] = true
		}
		if a.Rotations < 1 || len(distinct) != a.Rotations {
			t.Errorf("%s: the agent reconnected %d times for a rotated certificate, for %d distinct ones (the kubelet wrote %d new ones)",
				cluster.NodeName(i), a.Rotations, len(distinct), len(serials[i]))
		}
	}
	samePods(t, "agents", agents, switchyardPods(t, c, agentApp))
	samePods(t, "control plane", replicas, switchyardPods(t, c, controlPlaneApp))
}

// servingRenewal: the Secret switchyard-controlplane-tls replaced by a
// renewed certificate of the same CA (what cert-manager does) is served
// by every replica from a new handshake, counted in its reload metric,
// with no replica restarted and nothing lost.
func servingRenewal(t *testing.T, b *certBed) {
	c := b.c
	ctx := t.Context()
	agents, replicas := switchyardPods(t, c, agentApp), switchyardPods(t, c, controlPlaneApp)
	began := time.Now()
	at := replicaNodes(t, replicas)
	okBefore := map[int]float64{}
	for _, i := range at {
		okBefore[i] = reloads(t, c, i, controlPlaneMetricsPort, controlPlaneTLSFile, "ok")
		cert, err := servedCert(ctx, c, i)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: replica serves serial %x", cluster.NodeName(i), cert.SerialNumber)
	}
	traffic := b.traffic(t)
	certFile, keyFile, err := c.RenewControlPlaneCert()
	if err != nil {
		t.Fatal(err)
	}
	renewed := readCert(t, certFile)
	if err := chainsTo(renewed, c.ControlPlaneCA()); err != nil {
		t.Fatalf("the renewed certificate: %v", err)
	}
	secret := kubectl(t, c, "-n", cluster.SystemNS, "create", "secret", "tls", "switchyard-controlplane-tls",
		"--cert="+certFile, "--key="+keyFile, "--dry-run=client", "-o", "yaml")
	if err := c.Apply(ctx, "switchyard-controlplane-tls-renewed", secret); err != nil {
		t.Fatal(err)
	}
	replaced := time.Now()
	if !b.day2 {
		refreshVolumes(t, c, controlPlaneApp)
	}
	served := map[int]time.Duration{}
	waitFor(t, "every replica serves the renewed certificate", b.volumeWait, func() (bool, error) {
		for _, i := range at {
			if served[i] != 0 {
				continue
			}
			cert, err := servedCert(ctx, c, i)
			if err != nil {
				return false, err
			}
			if cert.Equal(renewed) && reloads(t, c, i, controlPlaneMetricsPort, controlPlaneTLSFile, "ok") > okBefore[i] {
				served[i] = time.Since(replaced)
			}
		}
		return len(served) == len(at), nil
	})
	for _, i := range at {
		t.Logf("%s: replica serves the renewed certificate (serial %x) %v after the Secret changed; reloads ok %v → %v",
			cluster.NodeName(i), renewed.SerialNumber, served[i].Round(time.Millisecond), okBefore[i],
			reloads(t, c, i, controlPlaneMetricsPort, controlPlaneTLSFile, "ok"))
		if f := reloads(t, c, i, controlPlaneMetricsPort, controlPlaneTLSFile, "failed"); f != 0 {
			t.Errorf("%s: the replica failed to load %v versions of %s", cluster.NodeName(i), f, controlPlaneTLSFile)
		}
	}
	// The kubelets of this bed still renew their certificates: an agent
	// may reconnect for that, and only for that.
	b.settleAndCheck(t, "serving certificate renewal", traffic, began, func(a streamAccount) int { return a.Rotations })
	samePods(t, "control plane", replicas, switchyardPods(t, c, controlPlaneApp))
	samePods(t, "agents", agents, switchyardPods(t, c, agentApp))
}

// replicaNodes is the node index of each control-plane replica.
func replicaNodes(t *testing.T, replicas map[string]podState) []int {
	t.Helper()
	var at []int
	for _, p := range replicas {
		i, err := strconv.Atoi(strings.TrimPrefix(p.Node, "node-"))
		if err != nil || cluster.NodeName(i) != p.Node {
			t.Fatalf("replica %s on node %q: not a bed node", p.Name, p.Node)
		}
		at = append(at, i)
	}
	if len(at) == 0 {
		t.Fatal("no control-plane replica")
	}
	return at
}

// caRotation runs README example "ca-rotation" on the base install, one
// step at a time; after a step that says "Then wait", and after the last,
// it waits until every agent loaded the bundle (its CA reload count went
// up by one). Then: each replica serves a certificate of the new CA, not
// of the old; each agent's bundle is the new CA alone; a restart of the
// replicas finds every agent reconnecting with it at the first attempt.
func caRotation(t *testing.T, b *certBed) {
	c := b.c
	ctx := t.Context()
	ex, ok := checkout.Examples(t)["ca-rotation"]
	if !ok {
		t.Fatal(`README has no example "ca-rotation"`)
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		checkout.Missing(t, "openssl not found: the example makes the new CA with it")
	}
	agents := switchyardPods(t, c, agentApp)
	replicas := len(switchyardPods(t, c, controlPlaneApp))
	oldCA := c.ControlPlaneCA()
	n := c.Nodes()
	caLoads := make([]float64, n)
	for i := range n {
		caLoads[i] = reloads(t, c, i, agentMetricsPort, agentCAFile, "ok")
	}
	began := time.Now()
	traffic := b.traffic(t)
	sh := startREADMEShell(t, c)
	for k, step := range ex.Steps {
		sh.runStep(t, step, 5*time.Minute)
		last := k == len(ex.Steps)-1
		if !strings.Contains(step.Comment, "Then wait") && !last {
			continue
		}
		done := time.Now()
		if !b.day2 {
			refreshVolumes(t, c, agentApp)
		}
		waitFor(t, fmt.Sprintf("every agent loaded the bundle of step %q", step.Comment), b.volumeWait, func() (bool, error) {
			for i := range n {
				if reloads(t, c, i, agentMetricsPort, agentCAFile, "ok") <= caLoads[i] {
					return false, nil
				}
			}
			return true, nil
		})
		t.Logf("every agent loaded the bundle %v after the step", time.Since(done).Round(time.Millisecond))
		for i := range n {
			got := reloads(t, c, i, agentMetricsPort, agentCAFile, "ok")
			if got != caLoads[i]+1 {
				t.Errorf("%s: the agent's CA reloads went from %v to %v, want up by one", cluster.NodeName(i), caLoads[i], got)
			}
			caLoads[i] = got
		}
		// AdminService's client (Settled) verifies the replicas with the
		// bundle as it is now.
		if err := c.ReadControlPlaneCA(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rotated := time.Since(began)
	newCA := readCert(t, filepath.Join(sh.dir, "new-ca.crt"))
	newPEM, err := os.ReadFile(filepath.Join(sh.dir, "new-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range replicaNodes(t, switchyardPods(t, c, controlPlaneApp)) {
		cert, err := servedCert(ctx, c, i)
		if err != nil {
			t.Fatal(err)
		}
		if err := chainsTo(cert, newPEM); err != nil {
			t.Errorf("%s: the replica's certificate does not chain to the new CA: %v", cluster.NodeName(i), err)
		}
		if err := chainsTo(cert, oldCA); err == nil {
			t.Errorf("%s: the replica's certificate still chains to the old CA", cluster.NodeName(i))
		}
	}
	for _, p := range agents {
		i, err := strconv.Atoi(strings.TrimPrefix(p.Node, "node-"))
		if err != nil {
			t.Fatal(err)
		}
		path, err := c.NodePath(i, "/var/lib/kubelet/pods/"+p.UID+"/volumes/kubernetes.io~configmap/ca/ca.crt")
		if err != nil {
			t.Fatal(err)
		}
		bundle, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := pemCerts(t, bundle); len(got) != 1 || !got[0].Equal(newCA) {
			t.Errorf("%s: the agent's %s holds %d certificates, want the new CA alone", p.Node, agentCAFile, len(got))
		}
	}
	t.Logf("README ca-rotation done %v after it began; the replicas serve from the new CA, the agents trust it alone", rotated.Round(time.Millisecond))
	// Every stream so far was opened under a bundle that held the old CA
	// too: restart the replicas once more, so that every agent opens one
	// trusting the new CA alone.
	kubectl(t, c, "-n", cluster.SystemNS, "rollout", "restart", "deployment/switchyard-controlplane")
	kubectl(t, c, "-n", cluster.SystemNS, "rollout", "status", "deployment/switchyard-controlplane", "--timeout=5m")
	b.settleAndCheck(t, "CA rotation", traffic, began, func(streamAccount) int {
		// Each restart of a replica (two in step 3, two after) moves its
		// agents to another: at most one new stream per restart.
		return 2 * replicas
	})
	streams := agentStreams(t, c, began.Add(rotated))
	for node, a := range streams {
		if a.Opens == 0 {
			t.Errorf("%s: the agent opened no stream after the rotation; nothing shows it connects trusting the new CA alone", node)
		}
	}
	samePods(t, "agents", agents, switchyardPods(t, c, agentApp))
}
