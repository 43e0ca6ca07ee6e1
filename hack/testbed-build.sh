#!/usr/bin/env bash
# Builds the test bed's real components from the Go module proxy and caches
# them outside the repository, keyed by version:
#
#   $SWITCHYARD_CACHE_DIR/testbed/k8s-<ver>_etcd-<ver>/bin/{etcd,kube-apiserver,kubectl}
#
# SWITCHYARD_CACHE_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/switchyard.
# A binary already in the cache is reused; a cold kube-apiserver build takes
# 10-18 minutes on 2 cores (about 870 CPU-seconds), a cached one nothing.
#
#   hack/testbed-build.sh          build what is missing, print the bin dir
#   hack/testbed-build.sh bindir   only print the bin dir
#   BUILD_KUBE_PROXY=1 ...         also build upstream kube-proxy (benchmarks)
#   BUILD_E2E=1 ...                also build upstream e2e.test (conformance)
#
# The real-cluster bed (e2e/cluster) also needs kubelet,
# kube-controller-manager, kube-scheduler, CoreDNS and agnhost; they are
# built here too, into the same bin dir:
#
#   $root/bin/{kubelet,kube-controller-manager,kube-scheduler,agnhost,coredns,e2e.test,ginkgo,regression-issue-74839}
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${SWITCHYARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}
root="$cache/testbed/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}"
bin="$root/bin"
build="$root/build"

if [[ ${1:-} == bindir ]]; then echo "$bin"; exit 0; fi

log() { echo "[testbed-build $(date +%H:%M:%S)] $*" >&2; }
now() { date +%s; }

# The build cache is shared with every other Go build on the machine only when
# these flags match everywhere: keep CGO_ENABLED=0 and -trimpath.
export CGO_ENABLED=0
gobuild() { go build -trimpath "$@"; }

# A progress line every 30 s so a 15-minute cold build does not look hung.
with_progress() {
  local what=$1; shift
  local start; start=$(now)
  "$@" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && log "$what: still building ($(( $(now) - start ))s)"
  done
  wait "$pid"
  log "$what: done in $(( $(now) - start ))s"
}

etcd_module() {
  mkdir -p "$build/etcd"
  cd "$build/etcd"
  # `go install go.etcd.io/etcd/server/v3@v…` refuses modules with replace
  # directives; a wrapper module that requires it builds the same main package.
  cat > go.mod <<EOM
module switchyard.local/etcdbuild

go 1.26.0

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
EOM
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
  go mod tidy
}

kube_module() {
  mkdir -p "$build/kube"
  cd "$build/kube"
  local want; want=$(declare -f write_kube_tools | sha256sum | cut -c1-16)
  [[ -f go.sum && -f .done && $(cat .done) == "$want" ]] && return 0
  # k8s.io/kubernetes pins its ~30 staging repos at v0.0.0 and replaces them
  # with ./staging paths. A dependency's replaces are ignored, so map each
  # one to its published v0.<minor>.<patch> tag, generated from its go.mod.
  local sver="v0${K8S_VERSION#v1}"
  go mod download "k8s.io/kubernetes@$K8S_VERSION"
  local kmod
  kmod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod"
  {
    echo "module switchyard.local/kubebuild"
    echo
    echo "go $(awk '/^go /{print $2; exit}' "$kmod")"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    awk -v s="$sver" '/^\tk8s\.io\/[a-z0-9-]+ v0\.0\.0$/ {print "\t" $1 " => " $1 " " s}' "$kmod"
    echo ")"
  } > go.mod
  write_kube_tools
  go mod tidy
  echo "$want" > .done
}

# The packages built from k8s.io/kubernetes. go mod tidy records their
# dependencies; e2e.test's are those of test/e2e/e2e_test.go's imports.
write_kube_tools() {
  cat > tools.go <<'EOM'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/apps"
	_ "k8s.io/kubernetes/test/e2e/architecture"
	_ "k8s.io/kubernetes/test/e2e/auth"
	_ "k8s.io/kubernetes/test/e2e/autoscaling"
	_ "k8s.io/kubernetes/test/e2e/common"
	_ "k8s.io/kubernetes/test/e2e/dra"
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/e2e/instrumentation"
	_ "k8s.io/kubernetes/test/e2e/invariants"
	_ "k8s.io/kubernetes/test/e2e/invariants/logcheck"
	_ "k8s.io/kubernetes/test/e2e/kubectl"
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/node"
	_ "k8s.io/kubernetes/test/e2e/scheduling"
	_ "k8s.io/kubernetes/test/e2e/storage"
	_ "k8s.io/kubernetes/test/e2e/storage/csimock"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	_ "k8s.io/kubernetes/test/e2e/windows"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
EOM
}

kube_ldflags() {
  local minor ldf="-s -w" p
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  # What hack/lib/version.sh sets upstream; without it /version says v0.0.0.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ldf"
}

build_kube_cmd() { # name [package]
  local name=$1 pkg=${2:-k8s.io/kubernetes/cmd/$1}
  [[ -x $bin/$name ]] && return 0
  (kube_module)
  log "building $name $K8S_VERSION"
  (cd "$build/kube" && with_progress "$name" gobuild -ldflags "$(kube_ldflags)" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
}

# e2e.test is a test binary: go test -c, same flags so the cache is shared.
build_e2e_test() {
  [[ -x $bin/e2e.test ]] && return 0
  (kube_module)
  log "building e2e.test $K8S_VERSION (cold: ~270 CPU-s)"
  (cd "$build/kube" && with_progress e2e.test go test -c -trimpath -ldflags "$(kube_ldflags)" -o "$bin/e2e.test.tmp" k8s.io/kubernetes/test/e2e)
  mv "$bin/e2e.test.tmp" "$bin/e2e.test"
}

build_coredns() {
  [[ -x $bin/coredns ]] && return 0
  log "building coredns $COREDNS_VERSION (cold: ~200 CPU-s)"
  mkdir -p "$build/coredns"
  (cd "$build/coredns"
    if [[ ! -f .done ]]; then
      printf 'module switchyard.local/corednsbuild\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > go.mod
      printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/coredns/coredns"\n' > tools.go
      go mod tidy && touch .done
    fi
    with_progress coredns gobuild -ldflags='-s -w' -o "$bin/coredns.tmp" github.com/coredns/coredns)
  mv "$bin/coredns.tmp" "$bin/coredns"
}

mkdir -p "$bin"
if [[ ! -x $bin/etcd ]]; then
  log "building etcd $ETCD_VERSION"
  (etcd_module)
  (cd "$build/etcd" && with_progress etcd gobuild -ldflags='-s -w' -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$bin/etcd.tmp" "$bin/etcd"
fi
[[ -x $bin/kube-apiserver ]] || log "kube-apiserver not cached: cold build takes 10-18 min on 2 cores"
build_kube_cmd kube-apiserver
build_kube_cmd kubectl
# The real-cluster bed (e2e/cluster): kubelet shares most of its packages
# with kube-apiserver, so it costs ~440 CPU-s after it.
build_kube_cmd kubelet
build_kube_cmd kube-controller-manager
build_kube_cmd kube-scheduler
build_kube_cmd agnhost k8s.io/kubernetes/test/images/agnhost
build_coredns
if [[ ${BUILD_E2E:-0} == 1 ]]; then
  build_e2e_test
  # The ginkgo CLI at e2e.test's own ginkgo version runs it in parallel
  # processes (switchyard-conformance -parallel), as hack/ginkgo-e2e.sh does.
  build_kube_cmd ginkgo github.com/onsi/ginkgo/v2/ginkgo
  # The boom server of the "invalid conntrack state" spec's image.
  build_kube_cmd regression-issue-74839 k8s.io/kubernetes/test/images/regression-issue-74839
fi
[[ ${BUILD_KUBE_PROXY:-0} == 1 ]] && build_kube_cmd kube-proxy

log "etcd: $("$bin/etcd" --version | head -1)"
log "kube-apiserver: $("$bin/kube-apiserver" --version)"
echo "$bin"
