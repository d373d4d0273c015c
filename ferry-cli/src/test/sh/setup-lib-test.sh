#!/usr/bin/env bash
# Checks bin/setup-lib.sh under the launchers' own `set -euo pipefail`, many times over: no check
# may fail because a reader left a pipe early and the writer died of SIGPIPE (bin/ferry then took
# an installed libfabric for missing and reinstalled it).
#   setup-lib-test.sh [runs] [setup-lib.sh]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
runs=${1:-200}
lib=${2:-$here/../../../../bin/setup-lib.sh}
. "$lib"
# The function under test; scripts older than the fix only had the whole check.
check=ferry_ldconfig_has_libfabric
declare -F "$check" >/dev/null || check=ferry_have_libfabric

fail() { printf 'setup-lib-test: FAILED: %s\n' "$*" >&2; exit 1; }
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
mkdir "$fake/with" "$fake/without"
# A linker cache that names libfabric first and then far more than a pipe holds (64 KiB): a reader
# that stops at the first match (grep -q) leaves ldconfig writing into a closed pipe.
for i in $(seq 8000); do
  printf '\tlibfiller%d.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfiller%d.so.1\n' "$i" "$i"
done >"$fake/filler"
cat >"$fake/with/ldconfig" <<SH
#!/usr/bin/env bash
printf '\tlibfabric.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfabric.so.1\n'
cat "$fake/filler"
SH
cat >"$fake/without/ldconfig" <<SH
#!/usr/bin/env bash
cat "$fake/filler"
SH
chmod +x "$fake/with/ldconfig" "$fake/without/ldconfig"

checks=0
for i in $(seq "$runs"); do
  PATH="$fake/with:$PATH" "$check" || fail "$check said no with a large linker cache that lists libfabric (run $i of $runs)"
  checks=$((checks + 1))
done
if [ "$check" = ferry_ldconfig_has_libfabric ]; then
  for i in $(seq 20); do
    if PATH="$fake/without:$PATH" "$check"; then fail "$check said yes with a cache that lacks libfabric"; fi
    checks=$((checks + 1))
  done
fi
if ldconfig -p 2>/dev/null | grep 'libfabric\.so\.1 ' >/dev/null; then
  for i in $(seq "$runs"); do
    "$check" || fail "$check said no with this machine's linker cache, which lists libfabric (run $i of $runs)"
    ferry_have_libfabric || fail "ferry_have_libfabric said no on this machine (run $i of $runs)"
    checks=$((checks + 2))
  done
fi
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/javac" ]; then
  for i in 1 2 3; do
    version=$(ferry_java_version "$JAVA_HOME") || fail "ferry_java_version failed for $JAVA_HOME (run $i)"
    [ -n "$version" ] && [ "$version" -ge 1 ] || fail "ferry_java_version printed '$version' for $JAVA_HOME"
    checks=$((checks + 1))
  done
fi
printf 'setup-lib-test: %d checks passed\n' "$checks"
