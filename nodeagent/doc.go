// Package nodeagent is the root of Switchyard's node agent module: the
// DaemonSet half that holds one stream to the control plane, applies each
// node view through a dataplane and acknowledges the version it applied.
//
// It never imports client-go (TestNoKubernetesClient enforces it): an agent
// needs no Kubernetes credentials. The command is cmd/switchyard-agent; the
// parts are under internal/ (see README.md for the map).
package nodeagent
