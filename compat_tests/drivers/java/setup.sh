#!/usr/bin/env bash
# Build the Java compat driver in two flavours from one source (src/Driver.java):
#   pom-4.xml -> rocketmq-client 4.9.8 + rocketmq-acl 4.9.8  -> target/driver-4.jar
#   pom-5.xml -> rocketmq-client 5.3.3 (5.x Remoting client)  -> target/driver-5.jar (+ src/Pop5.java,
#                the POP role, which only the 5.x client has)
# each with target/classpath-<flavour>.txt (the jars stay in the default ~/.m2 cache).
# Idempotent: returns at once when every jar is newer than the source and its pom and every
# classpath entry exists. Fails loudly (exit 1) when Java, Maven or an artifact is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$here/target"

for tool in java javac jar mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "java driver: '$tool' is not installed (Java 17 and Maven are needed)" >&2
    exit 1
  fi
done

current() {  # $1 = flavour
  local jar="$target/driver-$1.jar" cp="$target/classpath-$1.txt" entry
  [[ -s "$jar" && -s "$cp" && "$cp" -nt "$here/pom-$1.xml" && "$jar" -nt "$cp" && "$jar" -nt "$here/src/Driver.java" ]] || return 1
  [[ "$1" != 5 || "$jar" -nt "$here/src/Pop5.java" ]] || return 1
  while IFS= read -r entry; do [[ -f "$entry" ]] || return 1; done < <(tr ':' '\n' < "$cp")
}

mkdir -p "$target"
for flavour in 4 5; do
  current "$flavour" && continue
  log="$(mktemp)"
  if ! mvn -q -B -f "$here/pom-$flavour.xml" dependency:build-classpath \
        -Dmdep.outputFile="$target/classpath-$flavour.txt.tmp" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log" "$target/classpath-$flavour.txt.tmp"
    echo "java driver: cannot resolve compat_tests/drivers/java/pom-$flavour.xml from Maven Central (see above)" >&2
    exit 1
  fi
  rm -f "$log"
  mv -f "$target/classpath-$flavour.txt.tmp" "$target/classpath-$flavour.txt"
  classes="$target/classes-$flavour"
  rm -rf "$classes" && mkdir -p "$classes"
  sources=("$here/src/Driver.java")
  if [[ "$flavour" == 5 ]]; then
    sources+=("$here/src/Pop5.java")  # the POP role: 5.x client API only
  fi
  if ! javac -nowarn -Xlint:none -d "$classes" -cp "$(cat "$target/classpath-$flavour.txt")" \
        "${sources[@]}" 2> >(grep -v '^Note:' >&2); then
    echo "java driver: cannot compile src/Driver.java against pom-$flavour.xml" >&2
    exit 1
  fi
  jar --create --file "$target/driver-$flavour.jar.tmp" -C "$classes" .
  mv -f "$target/driver-$flavour.jar.tmp" "$target/driver-$flavour.jar"
  echo "java driver: target/driver-$flavour.jar ready"
done
