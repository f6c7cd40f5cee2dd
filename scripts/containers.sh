#!/usr/bin/env bash
# The container side of the test set-up: an engine, base images made locally, the rmqd image
# and the Apache RocketMQ reference image.  Every step is idempotent and fails loudly.
#
#   scripts/containers.sh engine      install Debian's docker.io if no engine is there
#   scripts/containers.sh start       start dockerd if none answers; prints "started" when it did
#   scripts/containers.sh stop        stop the dockerd `start` started (and nothing else)
#   scripts/containers.sh images      build what is missing; prints RMQD_IMAGE=... and APACHE_IMAGE=...
#   scripts/containers.sh rmqd-image  the rmqd image alone, also tagged rmqd:latest (scripts/dev image)
#   scripts/containers.sh setup       engine + start + images (+ stop if it started the engine)
#   scripts/containers.sh podman      Podman's Docker-compatible socket with the rmqd image (for its
#                                     test); prints DOCKER_HOST=... and PODMAN_IMAGE=...; podman-stop
#
# No image registry is reached: the base images are made with debootstrap from the Debian mirror
# apt is configured with and `docker import`ed (cached by tag), the rmqd image is built from
# wheels made on the host (build/wheels: rmqd's is compiled, a cp311 platform wheel, so the base
# must have the host's Python 3.x), the Apache image from the Maven Central jars
# compat_tests/apache/setup.sh resolved.  The rmqd and Apache images are tagged with a hash of
# their inputs, so a changed checkout builds a new image and an unchanged one builds nothing.
# RMQD_IMAGE_BASE / APACHE_IMAGE_BASE: use these base images instead (e.g. python:3.11-slim and
# eclipse-temurin:17-jre on a machine that can pull them).  DOCKER_HOST may name a Podman socket.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
STATE=${RMQD_DOCKERD_STATE:-/tmp/rmqd-dockerd}   # pid and log of the dockerd this script started

log() { echo "containers: $*" >&2; }
die() { echo "containers: $*" >&2; exit 1; }

engine_up() { docker info >/dev/null 2>&1; }

cmd_engine() {
  if command -v docker >/dev/null 2>&1 && { [[ -n "${DOCKER_HOST:-}" ]] || command -v dockerd >/dev/null 2>&1; }; then
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || die "no container engine and no apt-get to install Debian's docker.io"
  log "installing docker.io (Debian)"
  apt-get update -qq >/dev/null || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null || die "apt-get install docker.io failed"
}

cmd_start() {
  engine_up && return 0
  [[ -z "${DOCKER_HOST:-}" ]] || die "DOCKER_HOST=$DOCKER_HOST does not answer"
  command -v dockerd >/dev/null 2>&1 || die "dockerd is not installed (scripts/containers.sh engine)"
  mkdir -p "$STATE"
  dockerd >"$STATE/dockerd.log" 2>&1 &
  echo $! >"$STATE/pid"
  for _ in $(seq 150); do
    if engine_up; then echo started; return 0; fi
    kill -0 "$(cat "$STATE/pid")" 2>/dev/null || break
    sleep 0.2
  done
  tail -n 20 "$STATE/dockerd.log" >&2
  die "dockerd did not answer within 30 s (log: $STATE/dockerd.log)"
}

cmd_stop() {
  [[ -f "$STATE/pid" ]] || return 0
  local pid
  pid=$(cat "$STATE/pid")
  if [[ -n "$(docker ps -q 2>/dev/null)" ]]; then   # another test run on this machine still uses it
    log "dockerd $pid left running: containers of another run are up"
    return 0
  fi
  rm -f "$STATE/pid"
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  log "dockerd $pid did not stop within 20 s of SIGTERM; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# The Debian mirror and suite apt uses here (deb822 sources or sources.list).
debian_mirror() {
  local uri
  uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -n 1)
  [[ -n "$uri" ]] || uri=$(grep -hsE '^deb ' /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | grep -v security | head -n 1)
  echo "${uri:-http://deb.debian.org/debian}"
}

debian_suite() { . /etc/os-release && echo "${VERSION_CODENAME:-bookworm}"; }

# $1 = tag, $2 = packages to include: debootstrap --variant=minbase, trimmed, `docker import`ed.
local_base() {
  local tag=$1 include=$2 dir
  have_image "$tag" && return 0
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap (Debian)"
    apt-get update -qq >/dev/null || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null || die "apt-get install debootstrap failed"
  fi
  dir=$(mktemp -d /tmp/rmqd-rootfs.XXXXXX)
  log "building base image $tag (debootstrap $(debian_suite) + $include from $(debian_mirror))"
  if ! debootstrap --variant=minbase --include="$include" "$(debian_suite)" "$dir" "$(debian_mirror)" \
      >"$dir.log" 2>&1; then
    tail -n 20 "$dir.log" >&2
    rm -rf "$dir"
    die "debootstrap failed (log: $dir.log)"
  fi
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc/* \
         "$dir"/usr/share/man/* "$dir"/usr/share/locale/* "$dir"/usr/share/info/*
  tar -C "$dir" -c . | docker import - "$tag" >/dev/null || { rm -rf "$dir"; die "docker import of $tag failed"; }
  rm -rf "$dir" "$dir.log"
}

suite_tag() { debian_suite | tr -c 'a-z0-9\n' '-'; }

python_base() {
  if [[ -n "${RMQD_IMAGE_BASE:-}" ]]; then echo "$RMQD_IMAGE_BASE"; return; fi
  local tag="rmqd-local/python:$(suite_tag)"
  local_base "$tag" python3
  echo "$tag"
}

jre_base() {
  if [[ -n "${APACHE_IMAGE_BASE:-}" ]]; then echo "$APACHE_IMAGE_BASE"; return; fi
  local tag="rmqd-local/jre17:$(suite_tag)"
  local_base "$tag" openjdk-17-jre-headless
  echo "$tag"
}

build_image() {  # $1 = tag, $2 = base, $3 = context; the engine's output only when it fails
  local out
  if ! out=$(docker build --build-arg BASE="$2" -t "$1" "$3" 2>&1); then
    echo "$out" >&2
    die "docker build of $1 failed"
  fi
}

image_id() { docker image inspect --format '{{.Id}}' "$1"; }

# The rmqd image: tag = hash of the Dockerfile, docker/, the package's sources and the base.
rmqd_image() {
  local base hash tag
  base=$(python_base)
  hash=$( { image_id "$base"; cat Dockerfile .dockerignore;
            git ls-files -co --exclude-standard -z -- docker pyproject.toml setup.py MANIFEST.in LICENSE README.md \
              rmqd wire store processors broker spark | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16)
  tag="rmqd:dev-$hash"
  if ! have_image "$tag"; then
    [[ -x "$PY" ]] || die "no Python at $PY to build the wheels with (scripts/dev setup)"
    rm -rf build/wheels
    # rmqd's wheel is compiled (setup.py; its modules from rmqd/_build.py's cache when current)
    log "building wheels (rmqd, its dependencies, pip) into build/wheels"
    "$PY" -m pip wheel -q --disable-pip-version-check --wheel-dir build/wheels . pip \
      || die "pip wheel failed"
    wheel_fits "$base"
    log "building image $tag on $base"
    build_image "$tag" "$base" .
    log "$tag: $(docker run --rm --entrypoint python3 "$tag" -c \
      'from rmqd._compiled import compiled_status; print(compiled_status())' 2>&1 | tail -n 1)"
    # the build stages a day old and untagged (another checkout's may still be in use: newer ones stay)
    docker image prune -f --filter "until=24h" >/dev/null 2>&1 || true
  fi
  echo "$tag"
}

# A compiled (platform) wheel installs only on the Python it was built for: say so before the
# image build fails on "no matching distribution".
wheel_fits() {
  local whl want have
  whl=$(ls build/wheels/rmqd-*.whl 2>/dev/null | head -n 1)
  [[ -n "$whl" ]] || die "pip wheel made no rmqd wheel in build/wheels"
  case "$whl" in
    *-none-any.whl) log "$(basename "$whl") is plain Python (nothing compiled: see pip wheel -v); the image runs it so"
                    return 0 ;;
  esac
  want=$(basename "$whl" | cut -d- -f3)   # rmqd-0.1.0-cp311-cp311-linux_x86_64.whl -> cp311
  have=$(docker run --rm --entrypoint python3 "$1" -c 'import sys; print("cp%d%d" % sys.version_info[:2])') \
    || die "no python3 in $1"
  [[ "$want" == "$have" ]] || die "$(basename "$whl") is for $want (the Python at $PY) but $1 has $have: \
build the wheel with that Python (PYTHON=...) or set RMQD_IMAGE_BASE to a $want image"
}

# The Apache RocketMQ image: lib/ = the jars of compat_tests/apache/broker/classpath.txt.
apache_image() {
  local base hash tag cp=compat_tests/apache/broker/classpath.txt ctx
  [[ -s "$cp" ]] || bash compat_tests/apache/setup.sh >&2
  base=$(jre_base)
  hash=$( { image_id "$base"; cat "$cp"; cat compat_tests/apache/image/Dockerfile compat_tests/apache/image/launch.sh \
            compat_tests/apache/image/conf/*; } | sha256sum | cut -c1-16)
  tag="rmqd-apache-rocketmq:4.9.7-$hash"
  if ! have_image "$tag"; then
    ctx=build/apache-image
    rm -rf "$ctx"
    mkdir -p "$ctx/lib"
    cp -r compat_tests/apache/image/. "$ctx/"
    tr ':' '\n' <"$cp" | while IFS= read -r jar; do
      [[ -z "$jar" ]] && continue
      [[ -f "$jar" ]] || die "jar missing: $jar (compat_tests/apache/setup.sh)"
      cp "$jar" "$ctx/lib/"
    done
    log "building image $tag on $base"
    build_image "$tag" "$base" "$ctx"
    rm -rf "$ctx"
  fi
  echo "$tag"
}

cmd_images() {
  local r a
  r=$(rmqd_image)
  a=$(apache_image)
  echo "RMQD_IMAGE=$r"
  echo "APACHE_IMAGE=$a"
}

# Podman behind its Docker-compatible socket, to check rmqd.testcontainers against it: podman and
# runc installed if missing; containers.conf with runc (crun refuses hybrid cgroups) and rlimits
# root may set here; `podman system service` on $PODMAN_STATE/podman.sock if none answers (pid
# kept for podman-stop); the rmqd image copied over from Docker when Podman lacks it.
PODMAN_STATE=${RMQD_PODMAN_STATE:-/tmp/rmqd-podman}

podman_up() { curl -sf --unix-socket "$PODMAN_STATE/podman.sock" http://d/_ping >/dev/null 2>&1; }

cmd_podman() {
  if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
    log "installing podman and runc (Debian)"
    apt-get update -qq >/dev/null || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null || die "apt-get install podman failed"
  fi
  mkdir -p "$PODMAN_STATE"
  export CONTAINERS_CONF="$PODMAN_STATE/containers.conf"
  printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' \
    >"$CONTAINERS_CONF"
  if ! podman_up; then
    podman system service --time=0 "unix://$PODMAN_STATE/podman.sock" >"$PODMAN_STATE/service.log" 2>&1 &
    echo $! >"$PODMAN_STATE/pid"
    for _ in $(seq 100); do podman_up && break; sleep 0.2; done
    podman_up || die "podman system service did not answer within 20 s (log: $PODMAN_STATE/service.log)"
  fi
  local tag
  tag=$(rmqd_image)
  if ! podman image exists "localhost/$tag"; then
    log "copying $tag into Podman"
    docker save "$tag" | podman load -q >/dev/null || die "podman load of $tag failed"
    podman images --format '{{.Repository}}:{{.Tag}}' | grep '^localhost/rmqd:dev-' | grep -vx "localhost/$tag" \
      | xargs -r podman rmi >/dev/null 2>&1 || true
  fi
  echo "DOCKER_HOST=unix://$PODMAN_STATE/podman.sock"
  echo "PODMAN_IMAGE=localhost/$tag"
}

cmd_podman_stop() {
  [[ -f "$PODMAN_STATE/pid" ]] || return 0
  local pid
  pid=$(cat "$PODMAN_STATE/pid")
  rm -f "$PODMAN_STATE/pid"
  kill -TERM "$pid" 2>/dev/null || true
}

cmd_setup() {
  cmd_engine
  local started
  started=$(cmd_start)
  cmd_images
  if [[ "$started" == started ]]; then cmd_stop; fi
}

case "${1:-}" in
  engine) cmd_engine ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  images) cmd_images ;;
  rmqd-image)
    tag=$(rmqd_image)
    docker tag "$tag" rmqd:latest   # what `docker run ... rmqd` and RmqdContainer() start
    echo "$tag" ;;
  apache-image) apache_image ;;
  setup) cmd_setup ;;
  podman) cmd_podman ;;
  podman-stop) cmd_podman_stop ;;
  *) echo "usage: scripts/containers.sh engine|start|stop|images|rmqd-image|apache-image|setup|podman|podman-stop" >&2
     exit 2 ;;
esac
