# Switchyard — see README.md. `make demo` and `make test` do their own
# set-up (build and cache what they need, with progress lines); `make deps`
# is that set-up alone, which `.ci/run` runs first as a warm-up.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c

MODULES  := proto certfile controlplane nodeagent dataplane e2e
PKGS     := $(addsuffix /...,$(addprefix ./,$(MODULES)))
BIN      := $(CURDIR)/bin
# Binaries build with CGO_ENABLED=0 -trimpath everywhere, so the Go build
# cache is shared (see hack/testbed-build.sh); -race needs cgo, so tests use it.
NOCGO := CGO_ENABLED=0
GOTEST_FLAGS ?= -count=1
FUZZTIME ?= 10s

.PHONY: all deps apt-deps tools testbed proto proto-check buf-breaking build \
        lint fmt-check imports-check vet test unit-test fuzz bench bench-harness compare datapath qemu-guest ipvs-scenarios ipvs-handover ipvs-cluster demo demo-netns \
        cluster cluster-deps cluster-shell cluster-down images conformance latency soak day-two clean help

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

deps: apt-deps tools testbed qemu-guest ## install everything the tests need (cold: ~15-25 min of builds, cached by version)

apt-deps: ## Debian packages for dataplane tests (root only; skipped otherwise)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; for c in iptables:iptables nft:nftables conntrack:conntrack socat:socat ip:iproute2 ipset:ipset ipvsadm:ipvsadm openssl:openssl curl:curl jq:jq qemu-system-x86_64:qemu-system-x86 \
	           containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins mmdebstrap:mmdebstrap /bin/busybox:busybox-static nsenter:util-linux gdb:gdb; do \
	    command -v $${c%%:*} >/dev/null || missing="$$missing $${c#*:}"; done; \
	  if [ -n "$$missing" ]; then echo "apt-get install$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi; \
	else echo "apt-deps: not root, skipping Debian packages"; fi

IPVS_SCENARIOS_ARGS ?=
ipvs-scenarios: ## e2e/system's scenario table in the ipvs mode inside the QEMU guest (root; opt-in, not part of make test: ~25 min under TCG)
	@$(ROOT_CHECK)
	SWITCHYARD_GUEST_SCENARIOS=1 nice -n 10 go test -count=1 -timeout 75m -run '^TestSystemScenariosInGuest$$' -v ./e2e/dataplane/ipvs/ $(IPVS_SCENARIOS_ARGS)

IPVS_HANDOVER_ARGS ?=
ipvs-handover: ## IPVS → nftables/iptables and back, kube-proxy ipvs → Switchyard, under traffic, inside the QEMU guest (root; opt-in: ~10 min under TCG)
	@$(ROOT_CHECK)
	SWITCHYARD_GUEST_HANDOVER=1 nice -n 10 go test -count=1 -timeout 60m -run '^TestIPVSHandOverInGuest$$' -v ./e2e/dataplane/ipvs/ $(IPVS_HANDOVER_ARGS)

IPVS_CLUSTER_ARGS ?=
ipvs-cluster: ## the real-cluster bed (e2e/cluster: kubelet, containerd, CoreDNS) with Switchyard's ipvs mode inside the QEMU guest, logging each phase reached (root; opt-in, at most 45 min of guest time; SWITCHYARD_GUEST_CLUSTER_NODES, default 1)
	@$(ROOT_CHECK)
	SWITCHYARD_GUEST_CLUSTER=1 nice -n 10 go test -count=1 -timeout 60m -run '^TestClusterBedInGuest$$' -v ./e2e/dataplane/ipvs/ $(IPVS_CLUSTER_ARGS)

qemu-guest: ## Debian kernel + busybox + base initramfs for the IPVS guest tests (root; cached in ~/.cache/switchyard/qemu)
	@if [ "$$(id -u)" = 0 ]; then hack/qemu-kernel.sh prepare; else echo "qemu-guest: not root, skipping (IPVS guest tests will skip)"; fi

GRPCURL_VERSION := v1.9.4

tools: $(BIN)/buf $(BIN)/goimports $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/grpcurl ## buf, goimports, protoc plugins (pinned in go.mod files), grpcurl

$(BIN)/buf: hack/tools/go.mod
	cd hack/tools && GOWORK=off $(NOCGO) go build -trimpath -o $(BIN)/buf github.com/bufbuild/buf/cmd/buf

$(BIN)/goimports: hack/tools/go.mod
	cd hack/tools && GOWORK=off $(NOCGO) go build -trimpath -o $(BIN)/goimports golang.org/x/tools/cmd/goimports

$(BIN)/grpcurl:
	GOBIN=$(BIN) $(NOCGO) go install -trimpath github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

$(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc: proto/go.mod
	cd proto && $(NOCGO) go build -trimpath -o $(BIN)/protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go
	cd proto && $(NOCGO) go build -trimpath -o $(BIN)/protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc

testbed: ## build (or reuse from cache) etcd, kube-apiserver, kubectl, kubelet, kube-controller-manager, kube-scheduler, CoreDNS, agnhost, kube-proxy, e2e.test, the ginkgo CLI, regression-issue-74839
	BUILD_KUBE_PROXY=1 BUILD_E2E=1 hack/testbed-build.sh

proto: tools ## lint the API and regenerate its Go code
	$(BIN)/buf lint
	$(BIN)/buf generate

proto-check: proto buf-breaking ## fail when generated code is stale or the API breaks
	@if [ -n "$$(git status --porcelain -- proto)" ]; then \
	  echo "generated code is stale: run 'make proto' and commit"; git status --porcelain -- proto; exit 1; fi

buf-breaking: tools ## buf breaking against main (or the previous commit when on main)
	hack/buf-breaking.sh $(BIN)/buf

build: ## build all binaries into ./bin
	@for m in controlplane nodeagent; do \
	  if [ -d $$m/cmd ]; then (cd $$m && $(NOCGO) go build -trimpath -o $(BIN)/ ./cmd/...); fi; done
	$(NOCGO) go build -trimpath $(PKGS)

fmt-check:
	@out=$$(gofmt -l $(MODULES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Imports in three groups: standard library, third party, then this
# repository's own (goimports -local); generated code is buf's to format.
LOCAL_PREFIX := github.com/switchyard-proxy/switchyard
imports-check: $(BIN)/goimports
	@out=$$($(BIN)/goimports -local $(LOCAL_PREFIX) -l $(MODULES) | grep -v '\.pb\.go$$' || true); \
	  if [ -n "$$out" ]; then echo "imports not grouped (run: bin/goimports -local $(LOCAL_PREFIX) -w FILE):"; echo "$$out"; exit 1; fi

vet:
	go vet $(PKGS)

lint: fmt-check imports-check vet ## gofmt, import grouping (goimports -local), go vet, buf lint
	@if [ -x $(BIN)/buf ]; then $(BIN)/buf lint; else echo "buf not built: run make tools"; fi

unit-test: ## go test -race over every module (root-only tests skip unless root; e2e/cluster runs a real 2-node cluster)
	@rm -f $(BIN)/conformance-fast.txt
	CGO_ENABLED=1 SWITCHYARD_CONFORMANCE_SUMMARY=$(BIN)/conformance-fast.txt go test -race -timeout 40m $(GOTEST_FLAGS) $(PKGS)
	@if [ -f $(BIN)/conformance-fast.txt ]; then echo "== upstream e2e.test, fast subset (e2e/conformance TestFastSubset):"; cat $(BIN)/conformance-fast.txt; fi

fuzz: ## run each fuzz target for $(FUZZTIME)
	@for spec in controlplane/internal/translate:FuzzTranslate controlplane/internal/server:FuzzDiscoveryRequests \
	    nodeagent/internal/persist:FuzzLoad nodeagent/cmd/switchyard-agent:FuzzConfigFile; do \
	  dir=$${spec%%:*}; fn=$${spec#*:}; \
	  if grep -rqs "func $$fn(" $$dir; then \
	    echo "fuzz $$dir $$fn ($(FUZZTIME))"; out=$$(mktemp); \
	    if (cd $$dir && go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s .) >$$out 2>&1; then cat $$out; \
	    elif cat $$out && grep -q 'context deadline exceeded' $$out && ! grep -q 'Failing input written' $$out; then \
	      echo "fuzz $$fn: the fuzzing engine hit its own deadline, no failing input (seen once under load): once more"; \
	      (cd $$dir && go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s .) || { rm -f $$out; exit 1; }; \
	    else rm -f $$out; exit 1; fi; rm -f $$out; fi; done

test: deps lint proto-check unit-test fuzz ## everything CI runs (does its own set-up first: make deps)

BENCH_OUT  ?= $(CURDIR)/bench-out
BENCH_ARGS ?=

bench: ## benchmarks (numbers, never pass/fail): go test -bench, then the fan-out/API-load harness
	go test -run '^$$' -bench . -benchmem $(PKGS)
	$(MAKE) bench-harness

bench-harness: ## control-plane fan-out (fake feed + real apiserver) and API load -> $(BENCH_OUT)/bench.{jsonl,md} + profiles (~1.5 h on 2 vCPU; root for the kube-proxy part)
	mkdir -p $(BENCH_OUT) && rm -f $(BENCH_OUT)/bench.jsonl
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-bench -workdir $(BENCH_OUT) \
	  -suites fanout,apiload -paths fake,apiserver -sizes 1000x10,10000x10,5000x50 \
	  -agents 10,100,1000 -apiserver-agents 100 -reps 3 -changes 10 -sotw-changes 3 \
	  -apiload-agents 10,100,300,1000 -kube-proxies 20 \
	  -cpuprofile $(BENCH_OUT)/cpu.pprof -memprofile $(BENCH_OUT)/heap.pprof \
	  -out-json $(BENCH_OUT)/bench.jsonl -out-md $(BENCH_OUT)/bench.md $(BENCH_ARGS)

COMPARE_ARGS ?=
compare: ## upstream kube-proxy vs Switchyard side by side in namespaces, 1k/5k/10k services, 3 runs; a first sync over 5 min is recorded as timed out (root; ~20 min)
	mkdir -p bench
	go run ./e2e/cmd/switchyard-compare -sizes 1000,5000,10000 -runs 3 -sync-timeout 5m -out bench/compare.json -markdown bench/compare.md $(COMPARE_ARGS)

DATAPATH_ARGS ?=
datapath: ## the data path side by side: connect latency to ClusterIP and NodePort, short connections/s, bulk throughput; kube-proxy iptables/nftables, Switchyard iptables/nftables/userspace, a no-proxy floor; 1k and 10k services, 3 interleaved runs (root; ~30 min)
	@$(ROOT_CHECK)
	mkdir -p bench
	go run ./e2e/cmd/switchyard-compare -datapath -sizes 1000,10000 -runs 3 -sync-timeout 10m -out bench/datapath.json -markdown bench/datapath.md $(DATAPATH_ARGS)

DEMO_ARGS ?=
CLUSTER_ARGS ?=
ROOT_CHECK = if [ "$$(id -u)" != 0 ]; then echo "$@ needs root: it creates network namespaces, mount namespaces and cgroups (never changing this machine's own network namespace or sysctls); run: sudo make $@"; exit 1; fi

cluster-deps: apt-deps ## what the real cluster needs: Debian packages and the test bed's binaries (not kube-proxy, not e2e.test)
	hack/testbed-build.sh >/dev/null

demo: cluster-deps $(BIN)/grpcurl ## the real cluster: Switchyard from deploy/ as pods, traffic, a scale-down, grpcurl ListNodes (root; DEMO_ARGS=--exit tears down at once)
	@$(ROOT_CHECK)
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-cluster demo $(DEMO_ARGS)

demo-netns: ## the faster demo without kubelets: binaries in network namespaces (root)
	@$(ROOT_CHECK)
	go run ./e2e/cmd/demo $(DEMO_ARGS)

cluster: cluster-deps ## a real cluster (CLUSTER_NODES=2) with Switchyard installed; stays up until Ctrl-C or make cluster-down (root)
	@$(ROOT_CHECK)
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-cluster up $(CLUSTER_ARGS)

cluster-shell: ## a shell inside the running cluster's client namespace, kubectl and KUBECONFIG ready (root)
	@$(ROOT_CHECK)
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-cluster shell

cluster-down: ## tear the running cluster down (root)
	@$(ROOT_CHECK)
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-cluster down

IMAGES_ARGS ?= -only controlplane,agent

images: ## OCI archives (no Docker, no registry) -> out/images; IMAGES_ARGS="-only ..." (all: controlplane,agent,pause,coredns,agnhost,busybox); agent/agnhost need root for mmdebstrap (Debian rootfs, ~1 min once, cached)
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-images $(IMAGES_ARGS)

CONFORMANCE_ARGS ?=

conformance: apt-deps testbed ## upstream e2e.test [sig-network] against each proxy (Switchyard's modes, kube-proxy's), a fresh 6-node bed each (3 zones), 3 ginkgo processes, one proxy at a time -> conformance/results/*.json + CONFORMANCE.md (root; ~25–31 min per proxy, ~2 h 25 min for all five; CONFORMANCE_ARGS="-proxies ... -focus ..." or -markdown-only)
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-conformance $(CONFORMANCE_ARGS)

LATENCY_ARGS ?=
LATENCY_OUT  ?= $(CURDIR)/out/latency

latency: cluster-deps ## network programming latency on the real cluster, pod Ready -> rules on every node: Switchyard (deploy/) vs kube-proxy's DaemonSet, iptables and nftables, 100 scale events each on a fresh 2-node bed -> LATENCY_OUT=out/latency/latency.{json,md} (root; ~40 min per run; LATENCY_ARGS="-runs 3 -proxies ... -events N")
	@$(ROOT_CHECK)
	BUILD_KUBE_PROXY=1 hack/testbed-build.sh >/dev/null
	$(NOCGO) go run -trimpath ./e2e/cmd/switchyard-latency -out-json $(LATENCY_OUT)/latency.json -out-md $(LATENCY_OUT)/latency.md $(LATENCY_ARGS)

SOAK_DURATION ?= 10m
SOAK_SEED     ?=
SOAK_RATE     ?= 100
SOAK_OUT      ?= $(CURDIR)/out/soak

soak: cluster-deps ## faults on purpose: kill -9 agents, control-plane replicas and kube-apiserver at random for SOAK_DURATION=10m (seeded; SOAK_SEED=N repeats a run) under SOAK_RATE=100 conn/s and API changes -> SOAK_OUT=out/soak/soak.{json,md}; fails only when an invariant breaks (root; ~15 min; not part of make test)
	@$(ROOT_CHECK)
	cd e2e && SWITCHYARD_SOAK=1 SOAK_DURATION=$(SOAK_DURATION) SOAK_SEED=$(SOAK_SEED) SOAK_RATE=$(SOAK_RATE) SOAK_OUT=$(SOAK_OUT) \
	  go test -count=1 -timeout 0 -run '^TestSoak$$' -v ./system/

DAY2_RUN ?= TestRealCluster(HandOverMatrix|Certificates|Upgrade)

day-two: cluster-deps ## issue 35's long runs on the real cluster, under traffic: kube-proxy ⇄ Switchyard in every mode pair and order, certificate and CA rotation, upgrade and downgrade across versions (root; ~25 min; make test runs a smoke of each; DAY2_RUN=<go test -run regexp>)
	@$(ROOT_CHECK)
	BUILD_KUBE_PROXY=1 hack/testbed-build.sh >/dev/null
	cd e2e && SWITCHYARD_DAY2=1 go test -count=1 -timeout 0 -run '^$(DAY2_RUN)$$' -v ./cluster/

clean:
	rm -rf $(BIN)
