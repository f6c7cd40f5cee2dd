#!/usr/bin/env bash
# Resolve Apache RocketMQ (name server + broker 4.9.7, mqadmin tools 4.9.8) from Maven Central into
# classpath files (broker/classpath.txt, tools/classpath.txt); the jars stay in the default ~/.m2
# cache, so repeated runs are fast. Idempotent: returns at once when each classpath file is newer
# than its pom and every jar it names exists. Fails loudly (exit 1) when Java, Maven or an artifact
# is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# shellcheck source=classpath.sh
source "$here/classpath.sh"
require_java_maven
for module in broker tools; do
  resolve_classpath "$here/$module" "$module"
done

# the small Java clients the mqadmin comparison keeps connected (compiled against the tools' client)
classes="$here/clients/classes"
if [[ ! -f "$classes/Clients.class" || "$here/clients/Clients.java" -nt "$classes/Clients.class" \
      || "$here/tools/classpath.txt" -nt "$classes/Clients.class" ]]; then
  mkdir -p "$classes"
  if ! javac -nowarn -d "$classes" -cp "$(cat "$here/tools/classpath.txt")" "$here/clients/Clients.java"; then
    echo "apache rocketmq: cannot compile compat_tests/apache/clients/Clients.java" >&2
    exit 1
  fi
  echo "apache rocketmq: Java clients compiled"
fi
