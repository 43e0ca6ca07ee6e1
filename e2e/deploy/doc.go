// Package deploy proves deploy/ the way an operator uses it: `kubectl
// kustomize` renders the base (mTLS from the control plane's own CA) and the
// plaintext and cert-manager overlays, `kubectl apply -k`
// (server-side dry run, then for real) creates every object on the test
// bed's real kube-apiserver, and the created objects carry what the design
// promises (RBAC read-only, probes, anti-affinity, agent without
// credentials, ...). It also checks the images' Dockerfiles statically:
// COPY sources exist and the packages they build compile, since no Docker
// engine is available here. And it runs the README's CA rotation of the
// base install (example "ca-rotation") as printed, on the CA Secret and
// bundle ConfigMap as the control plane creates them.
//
// The test bed has no controller manager or scheduler: Deployments and
// DaemonSets are created but no pod ever appears, which is all these tests
// need. cert-manager is not installed; the overlay test installs stand-in
// CRDs for Issuer and Certificate (testdata/cert-manager-crds.yaml, no
// schema) so its objects are accepted, and checks their fields itself.
package deploy
