package servertest

import (
	"context"

	"google.golang.org/grpc"

	switchyardv1 "github.com/switchyard-proxy/switchyard/proto/switchyard/v1"
)

// DeltaWire is the DeltaSnapshots variant.
type DeltaWire struct{}

var _ Wire[*switchyardv1.DeltaSnapshotsRequest, *switchyardv1.DeltaSnapshotsResponse] = DeltaWire{}

// Open starts a DeltaSnapshots stream.
func (DeltaWire) Open(ctx context.Context, conn grpc.ClientConnInterface) (ClientStream[*switchyardv1.DeltaSnapshotsRequest, *switchyardv1.DeltaSnapshotsResponse], error) {
	return switchyardv1.NewDiscoveryServiceClient(conn).DeltaSnapshots(ctx)
}

// Ack acknowledges r, applied, with report.
func (DeltaWire) Ack(r *switchyardv1.DeltaSnapshotsResponse, report *switchyardv1.ApplyReport) *switchyardv1.DeltaSnapshotsRequest {
	return &switchyardv1.DeltaSnapshotsRequest{ResponseNonce: r.GetNonce(), AppliedVersion: r.GetSystemVersion(), Report: report}
}

// SotWWire is the StreamSnapshots (state of the world) variant.
type SotWWire struct{}

var _ Wire[*switchyardv1.StreamSnapshotsRequest, *switchyardv1.StreamSnapshotsResponse] = SotWWire{}

// Open starts a StreamSnapshots stream.
func (SotWWire) Open(ctx context.Context, conn grpc.ClientConnInterface) (ClientStream[*switchyardv1.StreamSnapshotsRequest, *switchyardv1.StreamSnapshotsResponse], error) {
	return switchyardv1.NewDiscoveryServiceClient(conn).StreamSnapshots(ctx)
}

// Ack acknowledges r, applied, with report.
func (SotWWire) Ack(r *switchyardv1.StreamSnapshotsResponse, report *switchyardv1.ApplyReport) *switchyardv1.StreamSnapshotsRequest {
	return &switchyardv1.StreamSnapshotsRequest{ResponseNonce: r.GetNonce(), VersionInfo: r.GetVersionInfo(), Report: report}
}
