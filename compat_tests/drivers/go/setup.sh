#!/usr/bin/env bash
# Build the Go client driver (compat_tests/drivers/go/bin/rmqd-go-driver) against the official
# github.com/apache/rocketmq-client-go/v2, pinned in go.mod/go.sum. Idempotent: returns at once
# when the binary is newer than the sources, go.mod and go.sum. Modules come through the default
# Go module proxy into the default module cache (~/go/pkg/mod), so repeated runs reuse them.
# Fails loudly (exit 1, one line) if Go is missing or a module cannot be had.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="$here/bin/rmqd-go-driver"

if ! command -v go >/dev/null 2>&1; then
  echo "go driver: 'go' is not installed (Go 1.21+ is needed to build compat_tests/drivers/go)" >&2
  exit 1
fi

if [[ -x "$bin" ]]; then
  stale=$(find "$here" -maxdepth 1 \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$bin" | head -1)
  [[ -z "$stale" ]] && exit 0
fi

cd "$here"
mkdir -p bin
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! go mod download >"$log" 2>&1 || ! go build -trimpath -o "$bin.tmp" . >>"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$bin.tmp"
  echo "go driver: cannot build with github.com/apache/rocketmq-client-go/v2 (module download or build failed, see above)" >&2
  exit 1
fi
mv -f "$bin.tmp" "$bin"
echo "go driver: built $bin"
