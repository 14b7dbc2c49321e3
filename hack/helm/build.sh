#!/usr/bin/env bash
# Builds the helm that the chart test (test/e2e/helm.e2e.ts) renders deploy/helm/tandem with, from
# the Go module pinned in this directory's go.mod/go.sum (helm.sh/helm/v4), into a cache outside the
# repository:
#
#   ${TANDEM_HELM_CACHE:-$HOME/.cache/tandem/helm}/<key>/bin/helm
#
# <key> is the first 16 hex digits of sha256(go.sum); the cache, lock and atomic rename are those
# of hack/lib/go-build-cache.sh.
#
# Usage: build.sh                  build if needed; prints timings on stderr, the bin directory on stdout
#        build.sh --print-bin-dir  print the bin directory for this go.sum and exit (no build)
#
# Needs: go (>= the go directive in go.mod), flock, sha256sum. Network: the Go module proxy only.
set -euo pipefail

readonly MODULE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly CACHE_ROOT="${TANDEM_HELM_CACHE:-$HOME/.cache/tandem/helm}"
readonly BUILD_NAME=helm
readonly BINARIES=(helm)
readonly KEY_FILES=("$MODULE_DIR/go.sum")
readonly COLD_NOTE="cold: 4.5-6.5 CPU-minutes, ~7 min on a shared 2-core machine; see docs/design/e2e-harness.md"
# shellcheck source=../lib/go-build-cache.sh
source "$MODULE_DIR/../lib/go-build-cache.sh"

# build_into DIR: downloads modules and compiles helm into DIR/bin, writes DIR/BUILD-INFO.
build_into() {
  local dir="$1" t0 t version
  t0="$(now_s)"

  # The modules of helm's packages only: `go mod download` would fetch the whole module graph and
  # add go.sum lines that `go mod tidy` removes again, changing the cache key under the build.
  t="$(now_s)"
  go list -deps helm.sh/helm/v4/cmd/helm >/dev/null
  log "module download: $(elapsed "$t")s"

  version="$(module_version helm.sh/helm/v4)"
  # What helm's own Makefile stamps for a release tag; without it `helm version` says v4.3 plus
  # "unreleased" metadata. The commit is not known from a module, so it stays empty.
  local pkg=helm.sh/helm/v4/internal/version
  compile "helm $version" -ldflags "-s -w -X $pkg.version=$version -X $pkg.metadata= -X $pkg.gitTreeState=clean" \
    -o "$dir/bin/helm" helm.sh/helm/v4/cmd/helm

  {
    echo "helm $version"
    echo "$(go version)"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(elapsed "$t0")s"
  } >"$dir/BUILD-INFO"
  log "total: $(elapsed "$t0")s"
}

cached_build_main "$@"
