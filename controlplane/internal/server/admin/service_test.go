package admin_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// serviceStatus is what GetService says of the fleet, without the views.
type serviceStatus struct {
	Applied, Total, Samples uint32
	P50, P99                time.Duration
	Summary                 string
	Acked                   map[string]bool
}

// TestGetServiceFleet: GetService counts the nodes that applied the
// service's desired version and, after a change, the fleet's programming
// latency from the change to each node's ACK. Three nodes have web; the
// watch recorded its change at t0 and published it to all three.
func TestGetServiceFleet(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		// acks: nodes that acknowledge, in order, their newest view, that
		// long after the change.
		acks []ack
		// then, when set, runs after the ACKs (a newer change, say).
		then func(tb *fleetBed)
		want serviceStatus
	}{{
		name: "nobody acknowledged the change yet",
		want: serviceStatus{Total: 3, Summary: "live on 0 of 3 nodes",
			Acked: map[string]bool{"node-a": false, "node-b": false, "node-c": false}},
	}, {
		name: "two of three",
		acks: []ack{{"node-a", 310 * ms}, {"node-b", 1200 * ms}},
		want: serviceStatus{Applied: 2, Total: 3, Samples: 2, P50: 310 * ms, P99: 1200 * ms,
			Summary: "live on 2 of 3 nodes (p50 330ms, p99 1.2s)",
			Acked:   map[string]bool{"node-a": true, "node-b": true, "node-c": false}},
	}, {
		name: "all three",
		acks: []ack{{"node-a", 40 * ms}, {"node-c", 50 * ms}, {"node-b", 9 * time.Second}},
		want: serviceStatus{Applied: 3, Total: 3, Samples: 3, P50: 50 * ms, P99: 9 * time.Second,
			Summary: "live on 3 of 3 nodes (p50 54ms, p99 9s)",
			Acked:   map[string]bool{"node-a": true, "node-b": true, "node-c": true}},
	}, {
		name: "a newer change starts over",
		acks: []ack{{"node-a", 310 * ms}, {"node-b", 1200 * ms}},
		then: func(tb *fleetBed) {
			tb.Change(cachetest.MustView(tb.t, cachetest.Service("default", "web", "10.96.0.10", 8443)))
			tb.Ack("node-c", 700*ms)
		},
		want: serviceStatus{Applied: 1, Total: 3, Samples: 1, P50: 700 * ms, P99: 700 * ms,
			Summary: "live on 1 of 3 nodes (p50 700ms, p99 700ms)",
			Acked:   map[string]bool{"node-a": false, "node-b": false, "node-c": true}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := newFleetBed(t)
			tb.Change(cachetest.MustView(t, cachetest.Service("default", "web", "10.96.0.10", 8080)))
			for _, a := range tt.acks {
				tb.Ack(a.node, a.after)
			}
			if tt.then != nil {
				tt.then(tb)
			}
			got := tb.get("default", "web")
			// A quantile is its bucket's upper bound (at most 9.05% above)
			// or the largest sample.
			for _, q := range []struct{ got, want *time.Duration }{{&got.P50, &tt.want.P50}, {&got.P99, &tt.want.P99}} {
				if *q.got >= *q.want && float64(*q.got) <= float64(*q.want)*1.0906 {
					*q.got = *q.want
				}
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("GetService (-want +got):\n%s", d)
			}
		})
	}
}

// TestGetServiceWithoutChange: a service unchanged since the replica
// started has no latency, applied or not.
func TestGetServiceWithoutChange(t *testing.T) {
	tb := newFleetBed(t)
	tb.Clock.Step(time.Second)
	tb.Ack("node-a", time.Second) // the resync after the first ACK: nothing new
	want := serviceStatus{Applied: 3, Total: 3, Summary: "live on 3 of 3 nodes",
		Acked: map[string]bool{"node-a": true, "node-b": true, "node-c": true}}
	if d := cmp.Diff(want, tb.get("default", "db")); d != "" {
		t.Errorf("GetService (-want +got):\n%s", d)
	}
}

type ack struct {
	node  string
	after time.Duration
}

// fleetBed is a servertest.Fleet in namespace default, without an API
// watch or settings.
type fleetBed struct {
	*servertest.Fleet
	t *testing.T
}

func newFleetBed(t *testing.T) *fleetBed {
	return &fleetBed{Fleet: servertest.NewFleet(t, "default", nil, nil), t: t}
}

func (tb *fleetBed) get(namespace, name string) serviceStatus {
	tb.t.Helper()
	resp, err := tb.Client.GetService(tb.t.Context(), &switchyardv1.GetServiceRequest{Namespace: namespace, Name: name})
	if err != nil {
		tb.t.Fatal(err)
	}
	got := serviceStatus{Applied: resp.GetAppliedNodes(), Total: resp.GetTotalNodes(), Samples: resp.GetLatencySamples(),
		Summary: resp.GetSummary(), Acked: map[string]bool{}}
	if resp.GetProgrammingLatencyP50() != nil {
		got.P50 = resp.GetProgrammingLatencyP50().AsDuration()
	}
	if resp.GetProgrammingLatencyP99() != nil {
		got.P99 = resp.GetProgrammingLatencyP99().AsDuration()
	}
	for _, n := range resp.GetNodes() {
		got.Acked[n.GetNodeName()] = n.GetAcked()
	}
	return got
}
