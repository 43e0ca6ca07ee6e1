package wire

import (
	"testing"

	"google.golang.org/grpc/mem"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// BenchmarkMarshalChange: one changed service, what a fan-out sends each
// agent.
func BenchmarkMarshalChange(b *testing.B) {
	views, res := framedViews(&testing.T{}, 1)
	resp := &switchyardv1.DeltaSnapshotsResponse{SystemVersion: "0123456789abcdef", Resources: res, Nonce: "12", ControlPlaneId: "benchcp"}
	for _, bc := range []struct {
		name string
		msg  any
		c    interface {
			Marshal(any) (mem.BufferSlice, error)
		}
	}{{"wire", &Message{Message: resp, Views: views}, New()}, {"proto", resp, New().base}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := bc.c.Marshal(bc.msg)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
	}
}
