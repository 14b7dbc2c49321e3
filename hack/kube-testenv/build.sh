#!/usr/bin/env bash
# Builds the control plane that Tandem's e2e tests and `npm run cluster` run: kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes, etcd, and KWOK's fake
# nodes, from the Go modules pinned in this directory (go.mod/go.sum for the Kubernetes binaries and
# etcd, kwok/go.mod/go.sum for KWOK), into a cache outside the repository:
#
#   ${TANDEM_KUBE_CACHE:-$HOME/.cache/tandem/kube}/<key>/bin/{kube-apiserver,...,kwok}
#
# <key> is the first 16 hex digits of sha256(go.sum followed by kwok/go.sum): a changed go.sum is a
# new key, an unchanged one reuses the binaries without invoking the compiler. A build runs under a
# lock (two concurrent builds of the same key build once), goes into a temporary directory and is
# renamed into place, so a key directory either holds a complete build or does not exist.
#
# Usage: build.sh             build if needed; prints timings on stderr, the bin directory on stdout
#        build.sh --print-bin-dir   print the bin directory for these go.sums and exit (no build)
#
# Needs: go (>= the go directive in go.mod; an older go fetches a newer toolchain through the module
# proxy), flock, sha256sum. Network: the Go module proxy only. The compiler runs under `nice -n 10`
# (a shared 2-core machine). See docs/design/e2e-harness.md.
set -euo pipefail

readonly HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly MODULE_DIR="$HERE"
readonly CACHE_ROOT="${TANDEM_KUBE_CACHE:-$HOME/.cache/tandem/kube}"
readonly BUILD_NAME=kube-testenv
readonly KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
readonly BINARIES=("${KUBE_BINARIES[@]}" etcd kwok)
readonly KEY_FILES=("$HERE/go.sum" "$HERE/kwok/go.sum")
readonly COLD_NOTE="cold: see docs/design/e2e-harness.md for the time it takes"
# shellcheck source=../lib/go-build-cache.sh
source "$HERE/../lib/go-build-cache.sh"

# build_into DIR: downloads modules and compiles every binary into DIR/bin, writes DIR/BUILD-INFO.
# One binary at a time: `go build` already compiles packages on every core, and the Kubernetes
# binaries share most packages, so each after the first compiles only what it adds.
build_into() {
  local dir="$1" t0 t k8s_version k8s_time etcd_version kwok_version minor name
  t0="$(now_s)"
  cd "$HERE"

  t="$(now_s)"
  go mod download
  (cd kwok && go mod download)
  log "module download: $(elapsed "$t")s"

  k8s_version="$(module_version k8s.io/kubernetes)"
  k8s_time="$(module_time k8s.io/kubernetes)"
  etcd_version="$(module_version go.etcd.io/etcd/server/v3)"
  kwok_version="$(cd kwok && module_version sigs.k8s.io/kwok)"
  minor="$(cut -d. -f2 <<<"$k8s_version")"

  # What kubernetes' own hack/lib/version.sh stamps; without it /version says v0.0.0-master.
  local -a kube_x=()
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kube_x+=(-X "$pkg.gitVersion=$k8s_version" -X "$pkg.gitMajor=1" -X "$pkg.gitMinor=$minor"
             -X "$pkg.gitTreeState=clean" -X "$pkg.gitCommit=" -X "$pkg.buildDate=$k8s_time")
  done

  for name in "${KUBE_BINARIES[@]}"; do
    compile "$name $k8s_version" -ldflags "-s -w ${kube_x[*]}" -o "$dir/bin/$name" "k8s.io/kubernetes/cmd/$name"
  done
  compile "etcd $etcd_version" -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_version" \
    -o "$dir/bin/etcd" go.etcd.io/etcd/server/v3
  # What KWOK's hack/releases.sh stamps; KubeVersion is the version its nodes report.
  (cd kwok && compile "kwok $kwok_version" -o "$dir/bin/kwok" \
    -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$kwok_version -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$k8s_version" \
    sigs.k8s.io/kwok/cmd/kwok)

  {
    for name in "${KUBE_BINARIES[@]}"; do echo "$name $k8s_version"; done
    echo "etcd $etcd_version"
    echo "kwok $kwok_version"
    echo "$(go version)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(elapsed "$t0")s"
  } >"$dir/BUILD-INFO"
  log "total: $(elapsed "$t0")s"
}

cached_build_main "$@"
