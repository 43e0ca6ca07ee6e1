package compare

import (
	"strings"
	"testing"
	"time"
)

// TestDataPathSmoke runs the data-path harness once on 20 services with
// every proxy (the floor, both kube-proxy modes, three Switchyard modes)
// and tiny counts. It checks only that each produced numbers and that
// every connection succeeded — never a time: the machine is shared.
func TestDataPathSmoke(t *testing.T) {
	requireBed(t)
	rep := runSmoke(t, Config{
		Sizes: []int{20}, MinSyncPeriod: 100 * time.Millisecond, CoalesceWindow: 20 * time.Millisecond,
		ChangeGap: 300 * time.Millisecond,
		DataPath: &DataPath{Samples: 5, Connects: 50, RateWorkers: 2, RateDuration: 200 * time.Millisecond,
			BulkDuration: 200 * time.Millisecond},
	})
	want := []string{"none/direct", "kube-proxy/iptables", "kube-proxy/nftables",
		"switchyard/iptables", "switchyard/nftables", "switchyard/userspace"}
	var got []string
	for _, r := range rep.Records {
		got = append(got, r.Name())
		checkDataPath(t, r)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("records %v, want %v", got, want)
	}
	if rep.DataPath == nil || len(rep.DataPath.Summaries) != len(want) || len(rep.DataPath.VsKubeProxy) == 0 || len(rep.DataPath.VsFloor) == 0 {
		t.Errorf("data-path report %+v, want a summary per proxy and both ratio tables", rep.DataPath)
	}
}

func checkDataPath(t *testing.T, r Record) {
	t.Helper()
	d := r.DataPath
	if d == nil {
		t.Errorf("%s: no data path (error %q)", r.Name(), r.Error)
		return
	}
	for what, l := range map[string]struct {
		samples, failed int
		err             string
		p50             float64
	}{
		"ClusterIP": {d.ClusterIP.Samples, d.ClusterIP.Failed, d.ClusterIP.Error, d.ClusterIP.P50},
		"NodePort":  {d.NodePort.Samples, d.NodePort.Failed, d.NodePort.Error, d.NodePort.P50},
	} {
		if l.samples != 50 || l.failed != 0 || l.p50 <= 0 {
			t.Errorf("%s %s: %d connects, %d failed (%s), p50 %v µs; want 50, none failed", r.Name(), what, l.samples, l.failed, l.err, l.p50)
		}
	}
	if d.Rate.Connections == 0 || d.Rate.Failed != 0 || d.Rate.PerSecond <= 0 {
		t.Errorf("%s: rate %+v, want connections and no failure", r.Name(), d.Rate)
	}
	if d.Bulk.Bytes == 0 || d.Bulk.BitsPerSecond <= 0 {
		t.Errorf("%s: bulk %+v, want bytes through", r.Name(), d.Bulk)
	}
}
