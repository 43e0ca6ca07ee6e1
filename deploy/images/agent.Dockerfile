# syntax=docker/dockerfile:1
# switchyard-agent. Build from the repository root (the go.work workspace
# is the build context):
#   docker build -f deploy/images/agent.Dockerfile --build-arg VERSION=$(git describe --always) -t switchyard-agent .
# e2e/deploy checks that every COPY source exists and the package builds.

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
# Every module the go.work uses must have its go.mod present, or the go
# command refuses the workspace; only the ones built need sources.
COPY go.work go.work.sum ./
COPY certfile/go.mod certfile/go.sum certfile/
COPY proto/go.mod proto/go.sum proto/
COPY controlplane/go.mod controlplane/go.sum controlplane/
COPY dataplane/go.mod dataplane/go.sum dataplane/
COPY nodeagent/go.mod nodeagent/go.sum nodeagent/
COPY e2e/go.mod e2e/go.sum e2e/
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY certfile/ certfile/
COPY proto/ proto/
COPY dataplane/ dataplane/
COPY nodeagent/ nodeagent/
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w -X main.version=${VERSION}" -o /out/switchyard-agent ./nodeagent/cmd/switchyard-agent

# The dataplanes drive the kernel through its own tools: iptables (both
# the legacy and nft back ends, chosen per node as kube-proxy does), ipset
# and ipvsadm (ipvs mode; kube-proxy leftovers), conntrack, nft, and ip
# (iproute2) for links. Debian's iptables ships the -legacy and -nft
# variants side by side.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables ipset ipvsadm conntrack nftables iproute2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/switchyard-agent /usr/local/bin/switchyard-agent
# Root with only NET_ADMIN and NET_RAW (see deploy/base/agent.yaml): the
# capabilities of a non-root user would not be effective.
ENTRYPOINT ["/usr/local/bin/switchyard-agent"]
