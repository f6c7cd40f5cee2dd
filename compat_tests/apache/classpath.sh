# Sourced by setup.sh and setup5.sh: resolve a module's pom.xml from Maven Central into
# <module>/classpath.txt (the jars stay in the default ~/.m2 cache). Returns at once when the
# classpath file is newer than its pom and every jar it names exists; exits 1 loudly when Java,
# Maven or an artifact is missing.

require_java_maven() {
  local tool
  for tool in java mvn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "apache rocketmq: '$tool' is not installed (Java 17 and Maven are needed)" >&2
      exit 1
    fi
  done
}

classpath_current() {  # $1 = module dir: classpath file newer than the pom, every jar present
  local cp="$1/classpath.txt"
  [[ -s "$cp" && "$cp" -nt "$1/pom.xml" ]] || return 1
  local jar
  while IFS= read -r jar; do [[ -f "$jar" ]] || return 1; done < <(tr ':' '\n' < "$cp")
}

resolve_classpath() {  # $1 = module dir, $2 = its name in messages
  local dir="$1" log
  classpath_current "$dir" && return 0
  log="$(mktemp)"
  if ! (cd "$dir" && mvn -q -B dependency:build-classpath -Dmdep.outputFile=classpath.txt.tmp >"$log" 2>&1); then
    cat "$log" >&2
    rm -f "$log" "$dir/classpath.txt.tmp"
    echo "apache rocketmq: cannot resolve $2/pom.xml from Maven Central (see above)" >&2
    exit 1
  fi
  rm -f "$log"
  mv -f "$dir/classpath.txt.tmp" "$dir/classpath.txt"
  echo "apache rocketmq: $2 classpath ready"
}
