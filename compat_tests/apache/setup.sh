#!/usr/bin/env bash
# Resolve Apache RocketMQ (name server + broker 4.9.7, mqadmin tools 4.9.8) from Maven Central into
# classpath files (broker/classpath.txt, tools/classpath.txt); the jars stay in the default ~/.m2
# cache, so repeated runs are fast. Idempotent: returns at once when each classpath file is newer
# than its pom and every jar it names exists. Fails loudly (exit 1) when Java, Maven or an artifact
# is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "apache rocketmq: '$tool' is not installed (Java 17 and Maven are needed)" >&2
    exit 1
  fi
done

current() {  # $1 = module dir: classpath file newer than the pom, every jar present
  local cp="$1/classpath.txt"
  [[ -s "$cp" && "$cp" -nt "$1/pom.xml" ]] || return 1
  local jar
  while IFS= read -r jar; do [[ -f "$jar" ]] || return 1; done < <(tr ':' '\n' < "$cp")
}

for module in broker tools; do
  dir="$here/$module"
  current "$dir" && continue
  log="$(mktemp)"
  if ! (cd "$dir" && mvn -q -B dependency:build-classpath -Dmdep.outputFile=classpath.txt.tmp >"$log" 2>&1); then
    cat "$log" >&2
    rm -f "$log" "$dir/classpath.txt.tmp"
    echo "apache rocketmq: cannot resolve $module/pom.xml from Maven Central (see above)" >&2
    exit 1
  fi
  rm -f "$log"
  mv -f "$dir/classpath.txt.tmp" "$dir/classpath.txt"
  echo "apache rocketmq: $module classpath ready"
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
