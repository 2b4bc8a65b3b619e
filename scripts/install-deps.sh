#!/usr/bin/env bash
# Installs the Debian packages hearth builds against, when any is missing.
set -euo pipefail
pkgs=(libgtest-dev libgmock-dev libcli11-dev libxxhash-dev libzstd-dev libre2-dev
      libssl-dev    # libcrypto: HMAC-SHA256 for API-key cache namespaces
      libbenchmark-dev  # Google Benchmark: build/src/hearth_cache_bench (optional)
      gnuplot-nox   # gnuplot: `hearth bench` plots
      clang libclang-rt-dev)  # libFuzzer and the sanitizer runtimes: `make fuzz`
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Tools: any install will do (Node.js and npm often come from elsewhere than Debian).
for tool in cmake:cmake g++:g++ make:make pkg-config:pkg-config git:git npm:npm; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing Debian packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
