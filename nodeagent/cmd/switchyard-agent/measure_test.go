package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/nodeagent/internal/discovery/cptest"
	"github.com/switchyard-proxy/switchyard/nodeagent/internal/persist"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

const (
	measureServices  = 10_000
	measureEndpoints = 3
	// measurePartSize splits the view (about 2.1 MiB) into parts, so the
	// agent buffers a split batch as it would a larger one; every part is
	// under gRPC's default 4 MiB receive limit.
	measurePartSize = 1 << 20
	measureIdle     = 2 * time.Second
)

// TestMeasureIdleRSS measures the real binary: its size, and its resident
// memory once idle with 10,000 services × 3 endpoints applied in dry-run
// mode. It asserts only that the view was applied and ACKed; the numbers
// go to the log. Opt-in, as CI does not need to pay for it:
//
//	cd nodeagent && SWITCHYARD_MEASURE=1 go test -count=1 -run TestMeasureIdleRSS -v ./cmd/switchyard-agent
func TestMeasureIdleRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement: skipped with -short")
	}
	if os.Getenv("SWITCHYARD_MEASURE") != "1" {
		t.Skip("measurement: set SWITCHYARD_MEASURE=1 to run it")
	}
	if runtime.GOOS != "linux" {
		t.Skip("measurement reads /proc/<pid>/status")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "switchyard-agent")
	buildAgent(t, bin)
	stripped := filepath.Join(dir, "switchyard-agent-stripped")
	buildAgent(t, stripped, "-ldflags=-s -w")

	parts := measureView(t, "v1")
	cp := cptest.New(t)
	stateDir := filepath.Join(dir, "state")
	stdout := createFile(t, filepath.Join(dir, "dry-run.out"))
	stderr := createFile(t, filepath.Join(dir, "agent.log"))
	cmd := exec.Command(bin, "--mode", "dry-run", "--insecure", "--control-plane", cp.Addr(), "--node-name", "node-a",
		"--state-dir", stateDir, "--healthz-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	if r := cp.Next(); r.GetNode().GetName() != "node-a" {
		t.Fatalf("first request = %v", r)
	}
	rssConnected := procStatus(t, cmd.Process.Pid, "VmRSS")
	start := time.Now()
	for _, p := range parts {
		cp.Push(p)
	}
	for acks := 0; ; acks++ {
		r := cp.Next()
		if r.GetErrorDetail() != nil {
			t.Fatalf("NACK: %v", r)
		}
		if r.GetAppliedVersion() == "v1" {
			if acks != len(parts)-1 {
				t.Errorf("%d part ACKs before the batch ACK, want %d", acks, len(parts)-1)
			}
			break
		}
	}
	ackTime := time.Since(start)

	// The measurement itself: let the agent sit idle, as on a quiet node.
	time.Sleep(measureIdle)
	rss := procStatus(t, cmd.Process.Pid, "VmRSS")
	hwm := procStatus(t, cmd.Process.Pid, "VmHWM")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	waited = true
	if err != nil {
		t.Errorf("agent exit after SIGTERM: %v\n%s", err, readFile(t, stderr.Name()))
	}

	t.Logf("binary (go build -trimpath, CGO_ENABLED=0): %s", mib(fileSize(t, bin)))
	t.Logf("binary (same, -ldflags=-s -w):              %s", mib(fileSize(t, stripped)))
	t.Logf("view: %d services × %d endpoints in %d parts (%s on the wire)", measureServices, measureEndpoints, len(parts), mib(wireSize(parts)))
	t.Logf("ACK of the whole view after:                %v", ackTime.Round(time.Millisecond))
	t.Logf("VmRSS connected, nothing applied:           %s", rssConnected)
	t.Logf("VmRSS idle %v after the ACK:                %s", measureIdle, rss)
	t.Logf("VmHWM (peak RSS):                           %s", hwm)
	t.Logf("persisted view (%s):                   %s", persist.FileName, mib(fileSize(t, filepath.Join(stateDir, persist.FileName))))
	t.Logf("dry-run output:                             %s", mib(fileSize(t, stdout.Name())))
}

// buildAgent builds this command as it ships: static, trimmed paths.
func buildAgent(t *testing.T, out string, extra ...string) {
	t.Helper()
	args := append([]string{"build", "-trimpath", "-o", out}, extra...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// measureView is a view of measureServices ClusterIP services with
// measureEndpoints endpoints each, split in parts under measurePartSize;
// only the last part carries the system version.
func measureView(t *testing.T, version string) []*switchyardv1.DeltaSnapshotsResponse {
	t.Helper()
	var parts []*switchyardv1.DeltaSnapshotsResponse
	cur := &switchyardv1.DeltaSnapshotsResponse{}
	size := 0
	for i := range measureServices {
		r := measureService(i)
		if n := proto.Size(r) + 8; size+n > measurePartSize {
			parts = append(parts, cur)
			cur, size = &switchyardv1.DeltaSnapshotsResponse{}, 0
		}
		cur.Resources = append(cur.Resources, r)
		size += proto.Size(r) + 8
	}
	parts = append(parts, cur)
	for i, p := range parts {
		p.Nonce = fmt.Sprintf("n%d", i+1)
		if n := proto.Size(p); n >= 4<<20 {
			t.Fatalf("part %d is %d bytes, over gRPC's 4 MiB limit", i, n)
		}
	}
	parts[len(parts)-1].SystemVersion = version
	return parts
}

func measureService(i int) *switchyardv1.Resource {
	ns, name := fmt.Sprintf("ns-%d", i/100), fmt.Sprintf("svc-%d", i)
	eps := make([]*switchyardv1.Endpoint, measureEndpoints)
	for j := range eps {
		n := i*measureEndpoints + j
		eps[j] = &switchyardv1.Endpoint{
			Address:  fmt.Sprintf("10.244.%d.%d", n/250%250, n%250+1),
			Ports:    []*switchyardv1.EndpointPort{{Name: "http", Port: 8080}},
			Ready:    true,
			Serving:  true,
			Zone:     "zone-a",
			NodeName: fmt.Sprintf("node-%d", n%100),
		}
	}
	return &switchyardv1.Resource{Name: ns + "/" + name, Version: "1", Body: &switchyardv1.Resource_Service{Service: &switchyardv1.ServiceView{
		Namespace:             ns,
		Name:                  name,
		Type:                  switchyardv1.ServiceType_SERVICE_TYPE_CLUSTER_IP,
		ClusterIps:            []string{fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)},
		Ports:                 []*switchyardv1.ServicePort{{Name: "http", Protocol: switchyardv1.Protocol_PROTOCOL_TCP, Port: 80}},
		SessionAffinity:       switchyardv1.SessionAffinity_SESSION_AFFINITY_NONE,
		ExternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		InternalTrafficPolicy: switchyardv1.TrafficPolicy_TRAFFIC_POLICY_CLUSTER,
		ClusterEndpoints:      eps,
		HasAnyEndpoints:       true,
	}}}
}

// procStatus returns a field of /proc/<pid>/status, e.g. "VmRSS" → "41234 kB".
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s (err %v)", pid, field, sc.Err())
	return ""
}

func createFile(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func wireSize(parts []*switchyardv1.DeltaSnapshotsResponse) int64 {
	var n int64
	for _, p := range parts {
		n += int64(proto.Size(p))
	}
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB (%d bytes)", float64(n)/(1<<20), n) }
