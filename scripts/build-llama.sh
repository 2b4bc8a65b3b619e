#!/usr/bin/env bash
# Builds llama.cpp (libllama, ggml, llama-common and the llama-server / llama-cli /
# llama-bench / llama-batched-bench tools used for comparison) from the source that the npm package
# node-llama-cpp ships as a git bundle. The result lives outside the repository, keyed by
# version and backend, so only the first build on a machine pays for it.
#
# Usage: scripts/build-llama.sh                 builds (once); prints the prefix on its last line
#        scripts/build-llama.sh --print-prefix  prints the prefix it would use; builds nothing
#        scripts/build-llama.sh --dry-run       prints backend, prefix and CMake flags; builds nothing
# Env:   HEARTH_BACKEND=cpu|metal|cuda|vulkan   default: chosen for the machine (Metal on Apple
#                                               Silicon, CUDA where nvcc and a GPU are found, else
#                                               CPU: scripts/lib/backend.sh)
#        HEARTH_RPC=1                            also ggml's RPC backend and its ggml-rpc-server
#                                               (for `hearth serve --rpc`), in its own prefix
#        HEARTH_CACHE=dir                        (default ~/.cache/hearth)
#        HEARTH_JOBS=n                           (default: the cores)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/backend.sh
source "$here/lib/backend.sh"
# shellcheck source=lib/host.sh
source "$here/lib/host.sh"

readonly NLC_VERSION=3.21.1
mode=build
case ${1:-} in
  "") ;;
  --print-prefix) mode=print-prefix ;;
  --dry-run) mode=dry-run ;;
  *) echo "build-llama: unknown argument '$1' (--print-prefix, --dry-run)" >&2; exit 2 ;;
esac
backend=$(choose_backend)
cache=${HEARTH_CACHE:-$HOME/.cache/hearth}
jobs=${HEARTH_JOBS:-$(cpu_count)}
prefix=$(llama_prefix "$cache" "$NLC_VERSION" "$backend")
backend_cmake_flags "$backend"
cpu_precision_flags "$(cpu_features)"
# (the guard keeps an empty array from tripping set -u in the Bash 3.2 of macOS)
cmake_flags=("${backend_flags[@]}" ${precision_flags[@]+"${precision_flags[@]}"})

# What to build; the stamp records it with the CMake flags, so adding a target here rebuilds
# incrementally and changing a flag configures the build again.
targets=(llama llama-common cpp-httplib llama-server llama-cli llama-completion llama-bench llama-batched-bench)
if [[ ${HEARTH_RPC:-0} == 1 ]]; then targets+=(ggml-rpc-server); fi
case $mode in
  print-prefix) echo "$prefix"; exit 0 ;;
  dry-run)
    echo "backend: $backend"
    echo "prefix: $prefix"
    echo "cmake flags: ${cmake_flags[*]}"
    echo "targets: ${targets[*]}"
    exit 0
    ;;
esac
stamp="$prefix/.built"
built="${targets[*]} | ${cmake_flags[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$built" ]]; then
  echo "$prefix"
  exit 0
fi

mkdir -p "$prefix"
log() { echo "build-llama: $*" >&2; }

if [[ ! -f "$prefix/src/CMakeLists.txt" ]]; then
  command -v npm >/dev/null || { log "npm is required to fetch node-llama-cpp"; exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  log "fetching node-llama-cpp@$NLC_VERSION from npm"
  (cd "$tmp" && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null)
  tar -xzf "$tmp/node-llama-cpp-$NLC_VERSION.tgz" -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$prefix/src"
  git clone --quiet "$tmp/package/llama/gitRelease.bundle" "$prefix/src.tmp" 2>/dev/null \
    || git clone --quiet "$tmp/package/llama/gitRelease.bundle" "$prefix/src.tmp"
  mv "$prefix/src.tmp" "$prefix/src"
fi

configured="$prefix/.configured"
if [[ ! -f "$prefix/build/CMakeCache.txt" || "$(cat "$configured" 2>/dev/null)" != "${cmake_flags[*]}" ]]; then
  log "configuring llama.cpp ($backend) in $prefix/build"
  cmake -S "$prefix/src" -B "$prefix/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_TOOLS_INSTALL=OFF -DLLAMA_ALL_WARNINGS=OFF \
    "${cmake_flags[@]}" >"$prefix/configure.log" 2>&1 \
    || { log "configure failed, see $prefix/configure.log"; rm -f "$prefix/build/CMakeCache.txt"; exit 1; }
  echo "${cmake_flags[*]}" >"$configured"
fi

log "building with $jobs jobs (first time only; takes a while on few cores)"
cmake --build "$prefix/build" -j "$jobs" \
  --target "${targets[@]}" \
  >"$prefix/build.log" 2>&1 \
  || { log "build failed, see $prefix/build.log"; tail -20 "$prefix/build.log" >&2; exit 1; }

echo "$built" >"$stamp"
echo "$prefix"
