#!/bin/sh
# Builds the prefetch helper (ferry_prefetch.c) into OUT/dev/ferry/ps/native/<machine>/ for the
# processor architecture of the machine that builds it. Called by Maven (ferry-ps,
# process-resources); needs a C compiler (bin/setup, bin/test and bin/ferry install gcc when it is
# missing and they run as root; otherwise they say so and stop).
set -eu
src=$(dirname "$0")/ferry_prefetch.c
out=$1/dev/ferry/ps/native/$(uname -m)
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "ferry-ps: no C compiler ($cc) for the prefetch helper; install one (apt-get install gcc)" >&2
  exit 1
fi
mkdir -p "$out"
"$cc" -O2 -fPIC -shared -Wall -Werror -o "$out/libferryprefetch.so" "$src"
