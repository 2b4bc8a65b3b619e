#!/usr/bin/env bash
# Configures a build folder for the llama.cpp build that scripts/build-llama.sh makes on
# this machine (its backend: HEARTH_BACKEND, HEARTH_RPC), and configures it again whenever
# that differs from the one the folder was configured with, saying so: a build for
# another backend never silently links the old llama.cpp. A folder configured by hand for
# a llama.cpp tree of its own (-DHEARTH_LLAMA_DIR, no prefix) is left as it is.
# Usage: scripts/configure.sh BUILD_DIR [cmake flags for a first configure...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: configure.sh BUILD_DIR [cmake flags...]}
shift
prefix=$(bash "$here/build-llama.sh" --print-prefix)
cache=$build/CMakeCache.txt
if [[ -f $cache ]]; then
  configured=$(sed -n 's/^HEARTH_LLAMA_PREFIX:[A-Z]*=//p' "$cache")
  [[ $configured == "$prefix" ]] && exit 0
  if [[ -z $configured && -n $(sed -n 's/^HEARTH_LLAMA_DIR:[A-Z]*=//p' "$cache") ]]; then exit 0; fi
  echo "configure: $build was configured for ${configured:-no llama.cpp}; configuring it for $prefix" >&2
fi
echo "configure: cmake -S . -B $build -DHEARTH_LLAMA_PREFIX=$prefix $*" >&2
cmake -S "$(dirname "$here")" -B "$build" -DHEARTH_LLAMA_PREFIX="$prefix" "$@" >/dev/null
