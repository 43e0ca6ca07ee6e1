module github.com/switchyard-proxy/switchyard/certfile

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	go.uber.org/goleak v1.3.0
	k8s.io/utils v0.0.0-20260626114624-be93311217bd
)
