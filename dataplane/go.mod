module github.com/switchyard-proxy/switchyard/dataplane

go 1.26.0

require github.com/switchyard-proxy/switchyard/proto v0.0.0

require (
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/switchyard-proxy/switchyard/proto => ../proto
