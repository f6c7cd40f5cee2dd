#!/usr/bin/env bash
# Resolve Apache RocketMQ 5.3.3 (rocketmq-namesrv + rocketmq-proxy, which brings the broker, the
# store and the 5.3.3 tools) from Maven Central into broker5/classpath.txt; the jars stay in
# ~/.m2. Idempotent (returns at once when the classpath is current); fails loudly (exit 1) when
# Java, Maven or an artifact is missing. compat_tests/apache5_rocketmq.py starts it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=classpath.sh
source "$here/classpath.sh"
require_java_maven
resolve_classpath "$here/broker5" "broker5"
