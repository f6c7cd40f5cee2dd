#!/usr/bin/env bash
# docs/containers.md's Testcontainers-for-Java example: resolve pom.xml's classpath from Maven
# Central (jars in ~/.m2) into target/classpath.txt and compile src/RmqdGenericContainer.java into
# target/classes.  Idempotent: returns at once when both are newer than their inputs.  Fails
# loudly when Java, Maven or an artifact is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$here/target"
for tool in javac mvn; do
  command -v "$tool" >/dev/null 2>&1 || { echo "testcontainers java example: '$tool' is not installed" >&2; exit 1; }
done
cp="$target/classpath.txt"
class="$target/classes/RmqdGenericContainer.class"
current() {
  [[ -s "$cp" && "$cp" -nt "$here/pom.xml" && -f "$class" && "$class" -nt "$here/src/RmqdGenericContainer.java" \
     && "$class" -nt "$cp" ]] || return 1
  local jar
  while IFS= read -r jar; do [[ -f "$jar" ]] || return 1; done < <(tr ':' '\n' < "$cp")
}
current && exit 0
mkdir -p "$target"
log="$(mktemp)"
if ! mvn -q -B -f "$here/pom.xml" dependency:build-classpath -Dmdep.outputFile="$cp.tmp" >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log" "$cp.tmp"
  echo "testcontainers java example: cannot resolve pom.xml from Maven Central (see above)" >&2
  exit 1
fi
rm -f "$log"
mv -f "$cp.tmp" "$cp"
rm -rf "$target/classes" && mkdir -p "$target/classes"
javac -nowarn -d "$target/classes" -cp "$(cat "$cp")" "$here/src/RmqdGenericContainer.java" \
  || { echo "testcontainers java example: cannot compile src/RmqdGenericContainer.java" >&2; exit 1; }
echo "testcontainers java example: compiled"
