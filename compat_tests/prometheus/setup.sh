#!/usr/bin/env bash
# A real Prometheus server for compat_tests/test_prometheus.py: Debian's `prometheus` package.
# Idempotent (nothing to do once `prometheus` runs); fails loudly when it cannot be installed.
# The package's own service is never started: the tests run their own server on a free
# 127.0.0.1 port with a temporary data directory and stop it.
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && prometheus --version >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "compat_tests/prometheus/setup.sh: apt-get not found; install Prometheus (2.x) so that 'prometheus' is on PATH" >&2
  exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# Keep dpkg from starting the packaged service (Docker images ship this file; add it if missing).
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=""
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod +x "$POLICY"
  ADDED_POLICY=1
fi
cleanup() { if [ -n "$ADDED_POLICY" ]; then $SUDO rm -f "$POLICY"; fi; }
trap cleanup EXIT

$SUDO apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null
prometheus --version 2>&1 | head -1
