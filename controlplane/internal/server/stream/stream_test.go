package stream_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/cache/cachetest"
	"github.com/switchyard-proxy/switchyard/controlplane/internal/server/stream"
	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// named is a view of a given encoded size.
func named(name string, size int) *cache.View {
	return &cache.View{Name: name, Version: "v", Bytes: make([]byte, size)}
}

func TestPack(t *testing.T) {
	// Each 10-byte view costs 12 bytes on the wire, each 4-byte name 6.
	v := func(name string) *cache.View { return named(name, 10) }
	tests := []struct {
		name      string
		resources []*cache.View
		removed   []string
		limit     int
		want      [][]string // names per part; removed names prefixed "-"
	}{
		{name: "nothing", limit: 100},
		{name: "fits", resources: []*cache.View{v("a"), v("b")}, removed: []string{"gone"}, limit: 100, want: [][]string{{"a", "b", "-gone"}}},
		{name: "exact fit", resources: []*cache.View{v("a"), v("b")}, limit: 10 + 24, want: [][]string{{"a", "b"}}},
		{name: "split", resources: []*cache.View{v("a"), v("b"), v("c")}, removed: []string{"xxxx", "yyyy"}, limit: 10 + 24, want: [][]string{{"a", "b"}, {"c", "-xxxx", "-yyyy"}}},
		{name: "oversize alone", resources: []*cache.View{v("a"), named("big", 100), v("c")}, limit: 10 + 24, want: [][]string{{"a"}, {"big"}, {"c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [][]string
			for _, p := range stream.Pack(tt.resources, tt.removed, tt.limit, 10) {
				var names []string
				for _, r := range p.Resources {
					names = append(names, r.Name)
				}
				for _, r := range p.Removed {
					names = append(names, "-"+r)
				}
				got = append(got, names)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFieldSizeMatchesProto checks the packing arithmetic against protobuf.
func TestFieldSizeMatchesProto(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 21} {
		v := cachetest.MustView(t, &switchyardv1.Resource{Name: strings.Repeat("x", n)})
		resp := &switchyardv1.DeltaSnapshotsResponse{Resources: []*switchyardv1.Resource{v.Raw()}, RemovedResources: []string{strings.Repeat("y", n)}}
		want := proto.Size(resp)
		if got := stream.FieldSize(len(v.Bytes)) + stream.FieldSize(n); got != want {
			t.Errorf("n=%d: FieldSize sum %d, proto.Size %d", n, got, want)
		}
	}
}

func TestNodeCert(t *testing.T) {
	cert := func(cn string, dns ...string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}
	}
	tlsPeer := func(c *x509.Certificate) context.Context {
		state := tls.ConnectionState{}
		if c != nil {
			state.PeerCertificates = []*x509.Certificate{c}
			state.VerifiedChains = [][]*x509.Certificate{{c}}
		}
		return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: state}})
	}
	tests := []struct {
		name string
		ctx  context.Context
		node string
		want codes.Code
	}{
		{name: "plaintext", ctx: peer.NewContext(context.Background(), &peer.Peer{}), node: "n1", want: codes.OK},
		{name: "no peer", ctx: context.Background(), node: "n1", want: codes.OK},
		{name: "TLS without client certificate", ctx: tlsPeer(nil), node: "n1", want: codes.PermissionDenied},
		{name: "DNS SAN", ctx: tlsPeer(cert("x", "n0", "n1")), node: "n1", want: codes.OK},
		{name: "kubelet CN", ctx: tlsPeer(cert("system:node:n1")), node: "n1", want: codes.OK},
		{name: "plain CN", ctx: tlsPeer(cert("n1")), node: "n1", want: codes.OK},
		{name: "other node", ctx: tlsPeer(cert("system:node:n2", "n2")), node: "n1", want: codes.PermissionDenied},
		{name: "suffix is not a match", ctx: tlsPeer(cert("system:node:n1x")), node: "n1", want: codes.PermissionDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := stream.NodeCert{}.Authorize(tt.ctx, tt.node)
			if got := status.Code(err); got != tt.want {
				t.Errorf("Authorize = %v, want %v", err, tt.want)
			}
		})
	}
}
