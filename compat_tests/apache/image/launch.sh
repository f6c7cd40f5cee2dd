#!/usr/bin/env bash
# Apache RocketMQ in one container: the name server, then (once it accepts) the broker, both
# with $ROCKETMQ_HOME/conf/{namesrv.properties,broker.conf} and that conf/'s logback files.
# SIGTERM stops the broker first (its shutdown hook flushes the store and removes the abort
# file), then the name server, and exits 0; if either JVM dies the other is stopped and its exit
# code is ours.  ROCKETMQ_OUT_DIR: write their stdout to namesrv.out and broker.out there
# instead of the container's output.  JAVA_OPT: more JVM words for both (e.g. TLS -D settings).
set -uo pipefail
home="${ROCKETMQ_HOME:-/opt/rocketmq}"
conf="$home/conf"
for f in namesrv.properties broker.conf; do
    [[ -f "$conf/$f" ]] || { echo "rocketmq-launch: $conf/$f is missing" >&2; exit 2; }
done
jvm=(${JAVA_HEAP:--Xms256m -Xmx512m -XX:MaxDirectMemorySize=512m})
for p in java.nio sun.nio.ch java.lang java.util java.lang.reflect java.io jdk.internal.ref; do
    jvm+=("--add-opens=java.base/$p=ALL-UNNAMED")   # Java 17: RocketMQ 4.9 unmaps files through these
done
jvm+=(--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED "-Drocketmq.home.dir=$home"
      "-Duser.home=${ROCKETMQ_USER_HOME:-$HOME}" -Drocketmq.client.logUseSlf4j=true
      -Djava.net.preferIPv4Stack=true ${JAVA_OPT:-} -cp "/opt/rocketmq/lib/*")

run() {  # $1 = name, rest = main class and arguments
    local name=$1; shift
    if [[ -n "${ROCKETMQ_OUT_DIR:-}" ]]; then
        java "${jvm[@]}" "$@" >>"$ROCKETMQ_OUT_DIR/$name.out" 2>&1 &
    else
        java "${jvm[@]}" "$@" &
    fi
}

ns_port=$(sed -n 's/^listenPort=//p' "$conf/namesrv.properties" | tail -n 1)
run namesrv org.apache.rocketmq.namesrv.NamesrvStartup -c "$conf/namesrv.properties"
ns=$!
br=""
stop() {
    [[ -n "$br" ]] && kill -TERM "$br" 2>/dev/null && wait "$br"
    kill -TERM "$ns" 2>/dev/null && wait "$ns"
    exit 0
}
trap stop TERM INT
until (exec 3<>"/dev/tcp/127.0.0.1/${ns_port:-9876}") 2>/dev/null; do
    kill -0 "$ns" 2>/dev/null || { wait "$ns"; code=$?; echo "rocketmq-launch: the name server exited with $code" >&2; exit "$code"; }
    sleep 0.1
done
run broker org.apache.rocketmq.broker.BrokerStartup -c "$conf/broker.conf"
br=$!
wait -n "$ns" "$br"
code=$?
echo "rocketmq-launch: a JVM exited with $code; stopping the other" >&2
kill -TERM "$ns" "$br" 2>/dev/null
wait
exit "$code"
