// Package controlplane holds the control plane's integration tests: the
// real switchyard-controlplane binary against a real kube-apiserver + etcd,
// driven by scripted gRPC clients and by grpcurl.
package controlplane
