# Shared by bin/setup, bin/test and bin/ferry: installs what is missing and picks the JDK.
# Sourced, not executed. Idempotent: a second call does nothing but checks.

ferry_log() { printf 'ferry-setup: %s\n' "$*" >&2; }

# Pipelines here run under the callers' `set -o pipefail`: a reader that stops early (grep -q,
# head) makes the writer die of SIGPIPE and the whole pipeline fail at random, so every filter
# reads its input to the end (grep >/dev/null, sed -n 1p).

ferry_java_version() { # prints the feature version of the JDK at $1, or nothing
  [ -x "$1/bin/java" ] && [ -x "$1/bin/javac" ] || return 0
  "$1/bin/java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java\.specification\.version = \([0-9]*\).*/\1/p' | sed -n 1p
}

ferry_find_jdk() {
  local candidate version
  for candidate in "${JAVA_HOME:-}" /usr/lib/jvm/*; do
    [ -n "$candidate" ] && [ -d "$candidate" ] || continue
    version=$(ferry_java_version "$candidate")
    if [ -n "$version" ] && [ "$version" -ge 25 ]; then
      printf '%s\n' "$candidate"
      return 0
    fi
  done
  return 1
}

ferry_ldconfig_has_libfabric() { # whether the linker cache lists libfabric.so.1
  local cache
  cache=$(ldconfig -p 2>/dev/null) || return 1
  case "$cache" in
    *'libfabric.so.1 '*) return 0 ;;
  esac
  return 1
}

ferry_have_libfabric() {
  ferry_ldconfig_has_libfabric && return 0
  local lib
  for lib in /usr/lib/*/libfabric.so.1 /lib/*/libfabric.so.1 /usr/lib/libfabric.so.1 /usr/local/lib/libfabric.so.1; do
    [ -e "$lib" ] && return 0
  done
  return 1
}

ferry_apt_install() { # packages...
  if [ "$(id -u)" -ne 0 ]; then
    ferry_log "missing Debian packages: $*. Install them as root: apt-get install $*"
    return 1
  fi
  ferry_log "installing $* (apt-get)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/tmp/ferry-apt.log 2>&1; then
    apt-get update -q >>/tmp/ferry-apt.log 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >>/tmp/ferry-apt.log 2>&1 || {
      ferry_log "apt-get install $* failed; see /tmp/ferry-apt.log"
      return 1
    }
  fi
}

ferry_setup() {
  if ! ferry_have_libfabric; then
    ferry_apt_install libfabric1 || return 1
  fi
  # fi_pingpong and fi_info (libfabric-bin) are the reference the benchmarks compare against.
  if ! command -v fi_pingpong >/dev/null 2>&1; then
    ferry_apt_install libfabric-bin || ferry_log "libfabric-bin missing: benchmarks will not compare with fi_pingpong"
  fi
  if ! command -v mvn >/dev/null 2>&1; then
    ferry_apt_install maven || return 1
  fi
  # The parameter server's prefetch helper (ferry-ps/src/main/c) is compiled by the build: a C
  # compiler, and the C library's headers and start files, which gcc only recommends (an image
  # that installs no recommended packages gets gcc without them, and the build fails).
  if ! command -v cc >/dev/null 2>&1 || [ ! -e /usr/include/stdint.h ]; then
    ferry_apt_install gcc libc6-dev || return 1
  fi
  local jdk
  if ! jdk=$(ferry_find_jdk); then
    ferry_log "no JDK >= 25 found (JAVA_HOME=${JAVA_HOME:-unset}, /usr/lib/jvm/*)."
    ferry_log "Install one (e.g. Temurin 25) and point JAVA_HOME at it."
    return 1
  fi
  export JAVA_HOME="$jdk"
  export PATH="$JAVA_HOME/bin:$PATH"
}

# Prometheus (Debian's package) for the metrics tests, which start their own on loopback.
# The package's service is not started: the tests run their own instance by PID.
ferry_setup_prometheus() {
  command -v prometheus >/dev/null 2>&1 && return 0
  ferry_apt_install prometheus || {
    ferry_log "prometheus missing: the metrics scrape test will fail (apt-get install prometheus)"
    return 1
  }
}

# Builds the launcher's jar with Maven. A terminal sees one progress line rewritten in place;
# a pipe or file gets plain lines, no colour codes. Maven's output is kept in a log that is
# shown when the build fails.
ferry_build() { # root
  local root=$1 log total=0 n=0 line module start
  log=$(mktemp "${TMPDIR:-/tmp}/ferry-build.XXXXXX.log")
  start=$(date +%s)
  total=$(grep -c '<module>' "$root/pom.xml" || true)
  ferry_log_build "building (mvn package, tests skipped)..."
  set +e
  (cd "$root" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.noreset=true" \
      mvn -B -ntp -Dstyle.color=never -DskipTests package 2>&1) | tee "$log" | while IFS= read -r line; do
    case "$line" in
      "[INFO] Building "*" ["*"/"*"]"*)
        module=${line#\[INFO\] Building }
        module=${module%% \[*}
        n=$((n + 1))
        if [ -t 2 ]; then
          printf '\rferry: building %s/%s %-60s' "$n" "$total" "$module" >&2
        fi
        ;;
    esac
  done
  local status=${PIPESTATUS[0]}
  set -e
  [ -t 2 ] && printf '\r%-80s\r' '' >&2
  if [ "$status" -ne 0 ]; then
    ferry_log_build "build failed; Maven said:"
    grep -E '^\[(ERROR|WARNING)\]' "$log" | head -n 40 | sed 's/\x1b\[[0-9;]*m//g' >&2
    ferry_log_build "full log: $log"
    return 1
  fi
  rm -f "$log"
  ferry_log_build "built in $(( $(date +%s) - start )) s"
}

ferry_log_build() { printf 'ferry: %s\n' "$*" >&2; }
