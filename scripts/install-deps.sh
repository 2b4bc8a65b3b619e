#!/usr/bin/env bash
# Installs what hearth builds and tests against, when any is missing: the Debian packages
# (as root; otherwise it prints the apt-get line to run), and a Node.js of version 22 or
# later for the end-to-end tests (scripts/lib/node.sh): the node on PATH when it is new
# enough, else the npm package `node`, pinned, into the build cache (~/.cache/hearth).
# Elsewhere than Debian it checks the tools and says what to install.
set -euo pipefail
source "$(dirname "$0")/lib/node.sh"

pkgs=(libgtest-dev libgmock-dev libcli11-dev libxxhash-dev libzstd-dev libre2-dev
      libssl-dev    # libcrypto: HMAC-SHA256 for API-key cache namespaces
      libbenchmark-dev  # Google Benchmark: build/src/hearth_cache_bench (optional)
      gnuplot-nox   # gnuplot: `hearth bench` plots
      chromium      # the web page's test in a headless browser (tests/web/)
      clang libclang-rt-dev)  # libFuzzer and the sanitizer runtimes: `make fuzz`
# Tools: any install will do (Node.js and npm often come from elsewhere than Debian).
tools=(cmake:cmake g++:g++ make:make pkg-config:pkg-config git:git npm:npm)

missing=()
for tool in "${tools[@]}"; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
done
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "install-deps: missing Debian packages: ${missing[*]}" >&2
      echo "install-deps: run as root, or: sudo apt-get install -y ${missing[*]}" >&2
      exit 1
    fi
    echo "install-deps: installing ${missing[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
elif [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps: not a Debian system: install ${missing[*]} (and the libraries this script lists)" >&2
  exit 1
fi

# Node.js for the end-to-end tests.
find_node_dir >/dev/null && exit 0
if [[ $(uname -s) == Linux ]] && install_pinned_node; then
  find_node_dir >/dev/null && exit 0
fi
echo "install-deps: the end-to-end tests need Node.js $node_min_major or later ($(describe_path_node))." >&2
echo "install-deps: install it and put it on PATH (macOS: brew install node)" >&2
exit 1
