# syntax=docker/dockerfile:1
# switchyard-controlplane. Build from the repository root (the go.work
# workspace is the build context):
#   docker build -f deploy/images/controlplane.Dockerfile -t switchyard-controlplane .
# e2e/deploy checks that every COPY source exists and the package builds.

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
# Every module the go.work uses must have its go.mod present, or the go
# command refuses the workspace; only the ones built need sources. Module
# files first so the download layer is cached across source changes.
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
COPY controlplane/ controlplane/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /out/switchyard-controlplane ./controlplane/cmd/switchyard-controlplane

# Static binary, no shell: the control plane only talks gRPC, HTTP and to
# the API server.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchyard-controlplane /usr/local/bin/switchyard-controlplane
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/switchyard-controlplane"]
