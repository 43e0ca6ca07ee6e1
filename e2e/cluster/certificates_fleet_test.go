package cluster_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/e2e/cluster"
	"github.com/switchyard-proxy/switchyard/e2e/internal/testca"
	"github.com/switchyard-proxy/switchyard/e2e/testbed/launch"
)

// What the certificate phases observe of the fleet: the Switchyard pods
// (restarted or not), the agents' and the control plane's metrics, the
// agents' control-plane streams as their logs tell them, and the
// certificate a replica serves.

const (
	agentApp        = "switchyard-agent"
	controlPlaneApp = "switchyard-controlplane"
	// The ports the deploy base gives the metrics, on each node's loopback.
	agentMetricsPort        = 10249
	controlPlaneMetricsPort = 10263
	// The files as the deploy base mounts them: the label of their
	// certificate_reloads_total series.
	agentCAFile         = "/etc/switchyard/ca/ca.crt"
	agentClientCertFile = "/var/lib/kubelet/pki/kubelet-client-current.pem"
	controlPlaneTLSFile = "/etc/switchyard/tls/tls.crt"
	reloadsAgent        = "switchyard_agent_certificate_reloads_total"
	reloadsControlPlane = "switchyard_controlplane_certificate_reloads_total"
	// controlPlaneName is a name every serving certificate of the installs
	// carries (the deploy base's --advertise-service, the mTLS overlay's
	// Certificate).
	controlPlaneName = "switchyard-controlplane." + cluster.SystemNS + ".svc"
)

// podState is what tells a pod restarted: a new pod has a new UID, a
// restarted container a higher count.
type podState struct {
	Name, Node string
	UID        string
	Restarts   int32
}

// switchyardPods lists the pods of app (agentApp, controlPlaneApp) by name.
func switchyardPods(t *testing.T, c *cluster.Cluster, app string) map[string]podState {
	t.Helper()
	var list corev1.PodList
	out := kubectl(t, c, "-n", cluster.SystemNS, "get", "pods", "-l", "app.kubernetes.io/name="+app, "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("pods of %s: %v", app, err)
	}
	pods := map[string]podState{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		s := podState{Name: p.Name, Node: p.Spec.NodeName, UID: string(p.UID)}
		for _, cs := range p.Status.ContainerStatuses {
			s.Restarts += cs.RestartCount
		}
		pods[p.Name] = s
	}
	return pods
}

// samePods fails t unless after holds exactly the pods of before, none of
// them restarted.
func samePods(t *testing.T, what string, before, after map[string]podState) {
	t.Helper()
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			t.Errorf("%s: pod %s (%s) is gone: replaced by %v", what, name, b.Node, after)
		case a.UID != b.UID || a.Restarts != 0:
			t.Errorf("%s: pod %s restarted: UID %s → %s, restarts %d", what, name, b.UID, a.UID, a.Restarts)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%s: %d pods, were %d", what, len(after), len(before))
	}
}

// refreshVolumes annotates the pods of app: a pod update makes its kubelet
// sync the pod at once, which rewrites its ConfigMap and Secret volumes,
// instead of at the next periodic sync (kubelet's syncFrequency, a minute,
// plus jitter). Only the default run does it, to keep the waits short;
// SWITCHYARD_DAY2=1 waits for the kubelet as an operator does.
func refreshVolumes(t *testing.T, c *cluster.Cluster, app string) {
	t.Helper()
	kubectl(t, c, "-n", cluster.SystemNS, "annotate", "pods", "-l", "app.kubernetes.io/name="+app, "--overwrite",
		"switchyard.test/volume-refresh="+strconv.FormatInt(time.Now().UnixNano(), 10))
}

// scrape reads the metrics served on 127.0.0.1:port of node i.
func scrape(ctx context.Context, c *cluster.Cluster, i, port int) (launch.Metrics, error) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return c.NodeDialContext(ctx, i, addr) }}}
	return launch.ScrapeMetrics(ctx, client, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
}

// reloads is node i's count of loads of file with result ("ok" or
// "failed"), from the agent or the control plane (port); 0 when the
// series does not exist yet.
func reloads(t *testing.T, c *cluster.Cluster, i, port int, file, result string) float64 {
	t.Helper()
	name := reloadsAgent
	if port == controlPlaneMetricsPort {
		name = reloadsControlPlane
	}
	m, err := scrape(t.Context(), c, i, port)
	if err != nil {
		t.Fatalf("%s: %v", cluster.NodeName(i), err)
	}
	v, err := m.Sum(name, `file="`+file+`"`, `result="`+result+`"`)
	if err != nil {
		return 0
	}
	return v
}

// streamAccount is one agent's control-plane streams in a period, from
// its log: "control-plane stream open" for each stream opened, "…stream
// ended" for each attempt that ended (opened or not), "client certificate
// rotated; reconnecting…" for each reconnect a rotation asked.
type streamAccount struct {
	Opens int
	// Failed counts the attempts that ended without opening a stream:
	// a refused handshake, an unreachable replica.
	Failed int
	// Rotations counts the reconnects asked to present a rotated
	// client certificate; RotatedTo names each one's certificate by its
	// notAfter.
	Rotations int
	RotatedTo []string
	// MaxGap is the longest time from a stream's end to the next open.
	MaxGap time.Duration
	// Down: the last stream ended and none opened after it.
	Down  bool
	Lines []string
}

// slogLine matches the agent's text log: time=… level=… msg="…".
var slogLine = regexp.MustCompile(`^time=(\S+) level=\S+ msg=("(?:[^"\\]|\\.)*"|\S+)`)

// notAfterAttr is the rotated certificate's end of validity in the
// agent's "client certificate rotated" line.
var notAfterAttr = regexp.MustCompile(` notAfter=(\S+)`)

// agentStreams reads every agent's log and accounts for its streams since
// since, by node.
func agentStreams(t *testing.T, c *cluster.Cluster, since time.Time) map[string]streamAccount {
	t.Helper()
	out := map[string]streamAccount{}
	for _, p := range switchyardPods(t, c, agentApp) {
		log := kubectl(t, c, "-n", cluster.SystemNS, "logs", p.Name)
		out[p.Node] = accountStreams(log, since)
	}
	return out
}

func accountStreams(log string, since time.Time) streamAccount {
	var a streamAccount
	var ended time.Time // of the last stream, while none opened since
	opened := false     // an open since the last end
	for line := range strings.Lines(log) {
		m := slogLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || at.Before(since) {
			continue
		}
		msg := m[2]
		if s, err := strconv.Unquote(msg); err == nil {
			msg = s
		}
		switch {
		case msg == "control-plane stream open":
			a.Opens++
			if !ended.IsZero() {
				a.MaxGap = max(a.MaxGap, at.Sub(ended))
			}
			ended, opened = time.Time{}, true
		case msg == "control-plane stream ended":
			if !opened && !ended.IsZero() {
				// An end after an end: that attempt opened nothing. (The
				// period's first end is of a stream opened before it.)
				a.Failed++
			}
			if ended.IsZero() {
				ended = at
			}
			opened = false
		case strings.HasPrefix(msg, "client certificate rotated"):
			a.Rotations++
			if na := notAfterAttr.FindStringSubmatch(line); na != nil {
				a.RotatedTo = append(a.RotatedTo, na[1])
			}
		default:
			continue
		}
		a.Lines = append(a.Lines, strings.TrimSpace(line))
	}
	a.Down = !ended.IsZero()
	return a
}

// checkStreams logs every agent's streams in the phase and fails t when
// an attempt to connect failed, an agent is left disconnected, or an
// agent opened more streams than maxOpens(node, account) allows.
func checkStreams(t *testing.T, phase string, streams map[string]streamAccount, maxOpens func(streamAccount) int) {
	t.Helper()
	for _, node := range slices.Sorted(maps.Keys(streams)) {
		a := streams[node]
		t.Logf("%s: %s's agent: %d streams opened, %d attempts failed, %d reconnects for a rotated client certificate, longest without a stream %v",
			phase, node, a.Opens, a.Failed, a.Rotations, a.MaxGap.Round(time.Millisecond))
		bad := a.Failed > 0 || a.Down || a.Opens > maxOpens(a)
		if bad {
			t.Errorf("%s: %s's agent: %d attempts failed, disconnected at the end %t, %d streams opened (want at most %d):\n%s",
				phase, node, a.Failed, a.Down, a.Opens, maxOpens(a), strings.Join(a.Lines, "\n"))
		}
	}
}

// servedCert is the certificate the control-plane replica on node i
// serves now, from a new TLS handshake (with the operator's client
// certificate, which the mTLS listener asks for); the chain is verified
// by the caller.
func servedCert(ctx context.Context, c *cluster.Cluster, i int) (*x509.Certificate, error) {
	_, certFile, keyFile, err := c.AdminCredentials()
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	raw, err := c.DialContext(ctx, netip.AddrPortFrom(cluster.NodeIP(i), cluster.GRPCPort).String())
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	conn := tls.Client(raw, &tls.Config{
		// Verified below against the pool the caller names: the point
		// is which CA the certificate chains to.
		InsecureSkipVerify: true, //nolint:gosec
		Certificates:       []tls.Certificate{pair},
		NextProtos:         []string{"h2"},
		MinVersion:         tls.VersionTLS12,
	})
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("%s: TLS handshake: %w", cluster.NodeName(i), err)
	}
	return conn.ConnectionState().PeerCertificates[0], nil
}

// chainsTo reports whether cert verifies, as a server certificate for
// controlPlaneName, against the CA certificates in caPEM.
func chainsTo(cert *x509.Certificate, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no CA certificate")
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: controlPlaneName})
	return err
}

// readCert parses the first certificate of a PEM file (a kubelet's
// current.pem holds the key too).
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	certs := pemCerts(t, b)
	if len(certs) == 0 {
		t.Fatalf("%s: no certificate", path)
	}
	return certs[0]
}

func pemCerts(t *testing.T, b []byte) []*x509.Certificate {
	t.Helper()
	certs, err := testca.ParseCerts(b)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// kubeletCert is node i's kubelet client certificate now.
func kubeletCert(t *testing.T, c *cluster.Cluster, i int) *x509.Certificate {
	t.Helper()
	path, err := c.KubeletClientCert(i)
	if err != nil {
		t.Fatal(err)
	}
	return readCert(t, path)
}

func TestAccountStreams(t *testing.T) {
	since := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	line := func(sec float64, msg string) string {
		at := since.Add(time.Duration(sec * float64(time.Second)))
		return fmt.Sprintf("time=%s level=INFO msg=%q address=10.201.0.10:18000\n", at.Format(time.RFC3339Nano), msg)
	}
	const (
		open  = "control-plane stream open"
		ended = "control-plane stream ended"
	)
	rotated := `time=2026-12-07T10:00:01Z level=INFO msg="client certificate rotated; reconnecting to present it" file=/x notAfter=2026-12-07T10:03:00Z previousNotAfter=2026-12-07T10:01:00Z` + "\n"
	tests := []struct {
		name string
		log  string
		want streamAccount
	}{
		{"before the period", line(-5, ended) + line(-4, open), streamAccount{}},
		{"a failover", line(-5, open) + line(1, ended) + line(1.5, open),
			streamAccount{Opens: 1, MaxGap: 500 * time.Millisecond}},
		{"a rotation", rotated + line(1, "closing the control-plane stream to open a new one") + line(1, ended) + line(1.25, open),
			streamAccount{Opens: 1, Rotations: 1, RotatedTo: []string{"2026-12-07T10:03:00Z"}, MaxGap: 250 * time.Millisecond}},
		{"failed attempts", line(1, ended) + line(2, ended) + line(4, ended) + line(5, open),
			streamAccount{Opens: 1, Failed: 2, MaxGap: 4 * time.Second}},
		{"down at the end", line(1, ended) + line(2, open) + line(3, ended),
			streamAccount{Opens: 1, MaxGap: time.Second, Down: true}},
		{"other lines", "garbage\n" + line(1, "applied; ACK"), streamAccount{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := accountStreams(tt.log, since)
			got.Lines = nil
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("accountStreams (-want +got):\n%s", d)
			}
		})
	}
}
