module github.com/switchyard-proxy/switchyard/dataplane

go 1.26.0
