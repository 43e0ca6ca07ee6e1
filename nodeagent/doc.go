// Package nodeagent is the root of Switchyard's node agent module: the
// DaemonSet half that holds one stream to the control plane, applies each
// node view through a dataplane and acknowledges the version it applied.
//
// It never imports client-go: an agent needs no Kubernetes credentials.
// The agent itself lands with issue 5; this package only anchors the module.
package nodeagent
