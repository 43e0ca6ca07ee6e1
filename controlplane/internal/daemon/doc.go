// Package daemon assembles and runs the control plane: the Kubernetes
// watch, the snapshot cache, the gRPC servers and the HTTP endpoints for
// metrics and health. cmd/switchyard-controlplane parses flags into
// Options and calls Run; tests call Run in-process.
package daemon
