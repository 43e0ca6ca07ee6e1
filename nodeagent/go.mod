module github.com/switchyard-proxy/switchyard/nodeagent

go 1.26.0
