package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/servertest"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// FuzzDiscoveryRequests sends arbitrary request sequences on both
// discovery streams of one running server — any node name, nonces,
// versions, initial_resource_versions, NACKs, reports — and then checks
// that a well-behaved agent is still served its view: no input may crash
// the server, wedge it, or poison what others get.
func FuzzDiscoveryRequests(f *testing.F) {
	seed := func(reqs ...proto.Message) []byte {
		var b []byte
		for _, r := range reqs {
			m, err := proto.Marshal(r)
			if err != nil {
				f.Fatal(err)
			}
			b = append(append(b, m...), 0xff, 0xfe)
		}
		return b
	}
	f.Add(seed(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: "node-a"}}), true)
	f.Add(seed(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: "node-a"},
		InitialResourceVersions: map[string]string{"default/web": "x", "": ""}},
		&switchyardv1.DeltaSnapshotsRequest{ResponseNonce: "bogus", AppliedVersion: "v9"}), true)
	f.Add(seed(&switchyardv1.StreamSnapshotsRequest{Node: &switchyardv1.Node{Name: "node-a"}},
		&switchyardv1.StreamSnapshotsRequest{ResponseNonce: "1", VersionInfo: "old"}), false)
	f.Add(seed(&switchyardv1.StreamSnapshotsRequest{}), false)
	f.Add([]byte{0x0a, 0xff, 0xff}, true)

	c := cache.New()
	c.Publish("node-a", cachetest.NewNodeView(cachetest.MustView(f, cachetest.Service("default", "web", "10.96.0.10", 80))), nil)
	addr, _ := run(f, server.New(server.Config{}, c, nil, nil))
	client := switchyardv1.NewDiscoveryServiceClient(servertest.Dial(f, addr))

	f.Fuzz(func(t *testing.T, data []byte, delta bool) {
		sctx, scancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer scancel()
		chunks := bytes.Split(data, []byte{0xff, 0xfe})
		if len(chunks) > 8 {
			chunks = chunks[:8]
		}
		if delta {
			if st, err := client.DeltaSnapshots(sctx); err == nil {
				drive[switchyardv1.DeltaSnapshotsRequest, *switchyardv1.DeltaSnapshotsRequest](st, chunks)
			}
		} else if st, err := client.StreamSnapshots(sctx); err == nil {
			drive[switchyardv1.StreamSnapshotsRequest, *switchyardv1.StreamSnapshotsRequest](st, chunks)
		}
		scancel()

		// A good agent is still served.
		start := time.Now()
		gctx, gcancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer gcancel()
		st, err := client.DeltaSnapshots(gctx)
		if err != nil {
			t.Fatalf("after the input, a good agent cannot open a stream: %v", err)
		}
		if err := st.Send(&switchyardv1.DeltaSnapshotsRequest{Node: &switchyardv1.Node{Name: "node-a"}}); err != nil {
			t.Fatalf("send: %v", err)
		}
		r, err := st.Recv()
		if err != nil || len(r.GetResources()) != 1 || r.GetResources()[0].GetName() != "default/web" {
			t.Fatalf("after the input, node-a's view is %v, %v after %v; want default/web", r, err, time.Since(start))
		}
	})
}

// drive sends each chunk that decodes as a request on st, stopping at the
// first that does not or the first send error, then reads up to two
// answers.
func drive[Req any, PReq interface {
	*Req
	proto.Message
}, Resp any](st grpc.BidiStreamingClient[Req, Resp], chunks [][]byte) {
	for _, ch := range chunks {
		req := PReq(new(Req))
		if proto.Unmarshal(ch, req) != nil || st.Send(req) != nil {
			break
		}
	}
	for range 2 { // read what the server answers, if anything
		if _, err := st.Recv(); err != nil {
			break
		}
	}
}
