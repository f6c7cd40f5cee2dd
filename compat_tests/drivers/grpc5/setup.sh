#!/usr/bin/env bash
# The RocketMQ 5.x gRPC clients of the gRPC compat cases, from their registries, each beside its driver:
#   java/   rocketmq-client-java 5.0.8 (Maven Central) -> target/grpc-driver.jar + target/classpath-client.txt
#           rocketmq-proto 2.0.4 (Maven Central)       -> target/rocketmq-proto-2.0.4.desc (the published
#           protocol's descriptors, which tests/wire/test_rocketmq_v2_facts.py compares with rmqd's table)
#   python/ rocketmq-python-client 5.1.2 (PyPI) in a venv of its own (target/python-venv): its top-level
#           package `rocketmq` would shadow the C++ client's of the same name in the project venv
#   node/   rocketmq-client-nodejs 1.0.8 (npm, package-lock.json) in node/node_modules
# Idempotent: each part returns at once when its outputs are newer than its inputs. Fails loudly
# (exit 1) when a tool or an artifact is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$here/target"
mkdir -p "$target"
PY=${PYTHON:-python3}

need() {
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "grpc5 drivers: '$tool' is not installed" >&2
      exit 1
    fi
  done
}

resolve() {  # $1 = pom, $2 = classpath output
  local log
  log="$(mktemp)"
  if ! mvn -q -B -f "$1" dependency:build-classpath -Dmdep.outputFile="$2.tmp" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log" "$2.tmp"
    echo "grpc5 drivers: cannot resolve $1 from Maven Central (see above)" >&2
    exit 1
  fi
  rm -f "$log"
  mv -f "$2.tmp" "$2"
}

classpath_ok() {  # every entry of $1 exists
  local entry
  [[ -s "$1" ]] || return 1
  while IFS= read -r entry; do [[ -f "$entry" ]] || return 1; done < <(tr ':' '\n' < "$1")
}

# -- Java ------------------------------------------------------------------------------------------
need java javac jar mvn
jar_out="$target/grpc-driver.jar"
cp_client="$target/classpath-client.txt"
if ! { classpath_ok "$cp_client" && [[ "$cp_client" -nt "$here/java/pom-client.xml" && "$jar_out" -nt "$cp_client" \
        && "$jar_out" -nt "$here/java/GrpcDriver.java" ]]; }; then
  resolve "$here/java/pom-client.xml" "$cp_client"
  rm -rf "$target/classes" && mkdir -p "$target/classes"
  if ! javac -nowarn -Xlint:none -d "$target/classes" -cp "$(cat "$cp_client")" "$here/java/GrpcDriver.java" \
        2> >(grep -v '^Note:' >&2); then
    echo "grpc5 drivers: cannot compile java/GrpcDriver.java" >&2
    exit 1
  fi
  jar --create --file "$jar_out.tmp" -C "$target/classes" .
  mv -f "$jar_out.tmp" "$jar_out"
  echo "grpc5 drivers: java driver (rocketmq-client-java 5.0.8) ready"
fi

desc="$target/rocketmq-proto-2.0.4.desc"
cp_proto="$target/classpath-proto.txt"
if ! { classpath_ok "$cp_proto" && [[ "$cp_proto" -nt "$here/java/pom-proto.xml" && "$desc" -nt "$cp_proto" \
        && "$desc" -nt "$here/java/DumpProto.java" ]]; }; then
  resolve "$here/java/pom-proto.xml" "$cp_proto"
  rm -rf "$target/dump-classes" && mkdir -p "$target/dump-classes"
  javac -nowarn -Xlint:none -d "$target/dump-classes" -cp "$(cat "$cp_proto")" "$here/java/DumpProto.java" \
    2> >(grep -v '^Note:' >&2)
  java -cp "$target/dump-classes:$(cat "$cp_proto")" DumpProto "$desc.tmp"
  mv -f "$desc.tmp" "$desc"
  echo "grpc5 drivers: rocketmq-proto 2.0.4 descriptors dumped"
fi

# TopicAdmin: topics with a message.type and groups for the cases, against both brokers, in one JVM
# (rocketmq-tools 5.3.3 from the Apache 5.3.3 reference's classpath, compat_tests/apache/setup5.sh)
cp_admin="$here/../../apache/broker5/classpath.txt"
admin_jar="$target/topic-admin.jar"
if [[ ! -s "$cp_admin" ]]; then
  echo "grpc5 drivers: $cp_admin is missing: run compat_tests/apache/setup5.sh first" >&2
  exit 1
fi
if ! [[ "$admin_jar" -nt "$here/java/TopicAdmin.java" && "$admin_jar" -nt "$cp_admin" ]]; then
  rm -rf "$target/admin-classes" && mkdir -p "$target/admin-classes"
  javac -nowarn -Xlint:none -d "$target/admin-classes" -cp "$(cat "$cp_admin")" "$here/java/TopicAdmin.java" \
    2> >(grep -v '^Note:' >&2)
  jar --create --file "$admin_jar.tmp" -C "$target/admin-classes" .
  mv -f "$admin_jar.tmp" "$admin_jar"
  echo "grpc5 drivers: topic admin (rocketmq-tools 5.3.3) ready"
fi

# -- Python ----------------------------------------------------------------------------------------
venv="$target/python-venv"
stamp="$venv/.rocketmq-python-client-5.1.2"
if [[ ! -f "$stamp" ]]; then
  rm -rf "$venv"
  "$PY" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  if ! "$venv/bin/python" -m pip install -q "rocketmq-python-client==5.1.2"; then
    echo "grpc5 drivers: cannot install rocketmq-python-client 5.1.2 from PyPI" >&2
    exit 1
  fi
  "$venv/bin/python" -c "import rocketmq; from rocketmq import Producer, SimpleConsumer" >/dev/null
  touch "$stamp"
  echo "grpc5 drivers: python driver (rocketmq-python-client 5.1.2) ready"
fi

# -- Node ------------------------------------------------------------------------------------------
need node npm
if [[ ! -d "$here/node/node_modules/rocketmq-client-nodejs" || "$here/node/package-lock.json" -nt "$here/node/node_modules" ]]; then
  (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  touch "$here/node/node_modules"
  echo "grpc5 drivers: node driver (rocketmq-client-nodejs 1.0.8) ready"
fi
