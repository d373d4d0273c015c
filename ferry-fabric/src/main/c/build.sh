#!/bin/sh
# Builds the spin-lock helper (ferry_locks.c) into OUT/dev/ferry/fabric/native/<machine>/ for the
# processor architecture of the machine that builds it. Called by Maven (ferry-fabric,
# process-resources); needs a C compiler (bin/setup, bin/test and bin/ferry install gcc when it is
# missing and they run as root; otherwise they say so and stop).
set -eu
src=$(dirname "$0")/ferry_locks.c
out=$1/dev/ferry/fabric/native/$(uname -m)
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "ferry-fabric: no C compiler ($cc) for the spin-lock helper; install one (apt-get install gcc)" >&2
  exit 1
fi
mkdir -p "$out"
"$cc" -O2 -fPIC -shared -Wall -Werror -o "$out/libferrylocks.so" "$src"
