# shellcheck shell=bash
# Shared by the hack/*/build.sh scripts that compile tools from a Go module directory into a
# cache outside the repository (docs/design/e2e-harness.md). Source it, set the variables below,
# define build_into, then call cached_build_main "$@":
#
#   BUILD_NAME     log prefix, e.g. "helm"
#   MODULE_DIR     the directory holding go.mod and go.sum
#   CACHE_ROOT     where <key>/bin/... goes; <key> = first 16 hex digits of sha256(the KEY_FILES)
#   KEY_FILES      array of the go.sum files the binaries depend on, concatenated into the key
#   BINARIES       array of the binary names a complete build holds in <key>/bin
#   COLD_NOTE      what a cold build costs, said when one starts
#   build_into DIR compiles every binary into DIR/bin and writes DIR/BUILD-INFO (first line: what was built)
#
# A changed go.sum is a new key; an unchanged one reuses the binaries without invoking go. A build
# runs under a lock (two concurrent builds of one key build once), goes into a temporary directory
# and is renamed into place, so a key directory either holds a complete build or does not exist.

log() { printf '%s: %s\n' "$BUILD_NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# cache_key: the first 16 hex digits of sha256 of the KEY_FILES, concatenated (one file: its sha256sum).
cache_key() { cat "${KEY_FILES[@]}" | sha256sum | cut -c1-16; }

# complete DIR: true when DIR/bin holds every binary, executable.
complete() {
  local name
  for name in "${BINARIES[@]}"; do [[ -x "$1/bin/$name" ]] || return 1; done
}

# module_version MODULE: the version of MODULE in the build list.
module_version() { go list -m -f '{{.Version}}' "$1"; }

# module_time MODULE: the publication time of MODULE's version (RFC 3339, UTC), for build dates.
module_time() { go list -m -f '{{with .Time}}{{.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' "$1"; }

# now_s: seconds since the epoch, with milliseconds.
now_s() { date +%s.%3N; }

# elapsed START: seconds since START, one decimal.
elapsed() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }'; }

# compile LOG_NAME ARGS...: `go build ARGS...` at low priority, logging how long it took.
compile() {
  local name="$1" t
  shift
  t="$(now_s)"
  nice -n 10 go build -trimpath "$@"
  log "compile $name: $(elapsed "$t")s"
}

# The temporary build directory, removed on exit unless renamed into place.
TMP_BUILD=""
cleanup() { [[ -z "$TMP_BUILD" ]] || rm -rf "$TMP_BUILD"; }

# cached_build_main [--print-bin-dir]: builds if needed; prints timings on stderr and the bin
# directory on stdout. --print-bin-dir prints the directory for this go.sum and exits (no build).
cached_build_main() {
  local key dest
  key="$(cache_key)"
  dest="$CACHE_ROOT/$key"

  if [[ "${1:-}" == "--print-bin-dir" ]]; then echo "$dest/bin"; return; fi
  [[ $# -eq 0 ]] || die "unknown argument: $1"

  if complete "$dest"; then
    log "cached: $dest/bin ($(head -n1 "$dest/BUILD-INFO" 2>/dev/null || echo '?'))"
    echo "$dest/bin"
    return
  fi

  command -v go >/dev/null || die "go not found on PATH (needed to build ${BINARIES[*]})"
  command -v flock >/dev/null || die "flock not found on PATH"
  mkdir -p "$CACHE_ROOT"

  exec 9>"$CACHE_ROOT/$key.lock"
  if ! flock -n 9; then
    log "another build of $key is running; waiting for it (at most 45 min)"
    flock -w 2700 9 || die "timed out waiting for the lock $CACHE_ROOT/$key.lock"
  fi
  if complete "$dest"; then
    log "built by a concurrent run: $dest/bin"
    echo "$dest/bin"
    return
  fi

  export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
  log "building $key with $(go version) ($COLD_NOTE)"
  rm -rf "$CACHE_ROOT/.build-$key."* # left by a killed build; the lock is ours
  TMP_BUILD="$(mktemp -d "$CACHE_ROOT/.build-$key.XXXXXX")"
  chmod 755 "$TMP_BUILD"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cd "$MODULE_DIR"
  build_into "$TMP_BUILD"

  # -mod=mod lets go add missing go.sum lines; binaries filed under the old key would then lie.
  [[ "$(cache_key)" == "$key" ]] || die "go.sum changed during the build; run 'go mod tidy' where it changed and commit it: ${KEY_FILES[*]}"
  rm -rf "$dest" # an incomplete leftover (a binary deleted by hand); the lock is ours
  mv -T "$TMP_BUILD" "$dest"
  TMP_BUILD=""
  log "installed: $dest/bin"
  echo "$dest/bin"
}
