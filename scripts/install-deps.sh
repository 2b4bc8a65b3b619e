#!/usr/bin/env bash
# Installs what hearth builds and tests against, when any is missing, and a Node.js of
# version 22 or later for the end-to-end tests (scripts/lib/node.sh):
#  - Debian (and its derivatives: dpkg-query is there): the Debian packages, as root
#    (otherwise it prints the apt-get line to run); Node.js: the node on PATH when it is
#    new enough, else the npm package `node`, pinned, into the build cache (~/.cache/hearth).
#  - macOS: the same libraries and tools from Homebrew (brew install), Homebrew's node
#    when no node on PATH is new enough and its chromium (a cask) when neither it nor
#    Google Chrome is there; the compiler comes with Xcode's Command Line Tools.
#  - any other system: checks the tools and libraries it can see (commands, pkg-config
#    modules) and, when one is missing, says what to install (with the package names of
#    Fedora and Arch as examples) and exits 1.
set -euo pipefail
# shellcheck source=lib/node.sh
source "$(dirname "$0")/lib/node.sh"

debian_pkgs=(libgtest-dev libgmock-dev libcli11-dev libxxhash-dev libzstd-dev libre2-dev
             libssl-dev    # libcrypto: HMAC-SHA256 for API-key cache namespaces
             libhiredis-dev redis-server  # the shared cache tier on Redis, and its tests' server
             haproxy       # a load balancer in front of several replicas (shared-tier tests)
             libbenchmark-dev  # Google Benchmark: build/src/hearth_cache_bench (optional)
             gnuplot-nox   # gnuplot: `hearth bench` plots
             chromium      # the web page's test in a headless browser (tests/web/)
             clang libclang-rt-dev  # libFuzzer and the sanitizer runtimes: `make fuzz`
             jq curl       # the crash-loop and restart tests talk to the server with them
             shellcheck)   # ctest scripts_lint
# The same on Homebrew (Apple's clang has no libFuzzer: `make fuzz` is not covered there).
brew_formulas=(cmake pkgconf googletest cli11 xxhash zstd re2 openssl@3 hiredis redis haproxy
               google-benchmark gnuplot jq shellcheck)
# Tools: any install will do (Node.js and npm often come from elsewhere than Debian).
tools=(cmake:cmake g++:g++ make:make pkg-config:pkg-config git:git npm:npm)

missing=()

install_debian() {
  local tool p
  for tool in "${tools[@]}"; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool##*:}")
  done
  for p in "${debian_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ $(id -u) -ne 0 ]]; then
      echo "install-deps: missing Debian packages: ${missing[*]:-}" >&2
      echo "install-deps: run as root, or: sudo apt-get install -y ${missing[*]:-}" >&2
      exit 1
    fi
    echo "install-deps: installing ${missing[*]:-}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${missing[@]+"${missing[@]}"} >/dev/null
  fi
}

install_brew() {
  local f
  if ! command -v brew >/dev/null 2>&1; then
    echo "install-deps: macOS: hearth's libraries come from Homebrew (brew.sh); install it and run this again," >&2
    echo "install-deps: or install these yourself: ${brew_formulas[*]} and Node.js $node_min_major or later" >&2
    exit 1
  fi
  if ! command -v c++ >/dev/null 2>&1 || ! command -v git >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
    echo "install-deps: macOS: the compiler, git and make come with Xcode's Command Line Tools: run xcode-select --install" >&2
    exit 1
  fi
  find_node_dir >/dev/null || brew_formulas+=(node)
  for f in "${brew_formulas[@]}"; do
    brew list --versions "$f" >/dev/null 2>&1 || missing+=("$f")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    echo "install-deps: brew install ${missing[*]:-}" >&2
    brew install ${missing[@]+"${missing[@]}"}
  fi
  # The web page's test (tests/web/) drives a headless Chromium: Homebrew's cask, unless a
  # chromium or Google Chrome is there already.
  if [[ -z ${HEARTH_CHROMIUM:-} ]] && ! command -v chromium >/dev/null 2>&1 &&
     [[ ! -x "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" ]]; then
    echo "install-deps: brew install --cask chromium" >&2
    brew install --cask chromium
  fi
}

explain_other() {
  local tool m
  for tool in "${tools[@]}" jq:jq curl:curl shellcheck:shellcheck redis-server:redis-server haproxy:haproxy; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool%%:*}")
  done
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
  local modules=(gtest gmock CLI11 libxxhash libzstd re2 libcrypto hiredis) libs=()
  for m in "${modules[@]}"; do
    if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists "$m"; then libs+=("$m"); fi
  done
  [[ ${#missing[@]} -eq 0 && ${#libs[@]} -eq 0 ]] && return 0
  {
    echo "install-deps: $(uname -s) without dpkg-query: this script installs only on Debian and macOS."
    echo "install-deps: install these with your package manager, then run it again:"
    [[ ${#missing[@]} -eq 0 ]] || echo "  commands: ${missing[*]:-}"
    [[ ${#libs[@]} -eq 0 ]] || echo "  libraries (pkg-config names, with their headers): ${libs[*]:-}"
    echo "  (optional: Google Benchmark, gnuplot for plots, clang with libFuzzer for make fuzz)"
    echo "install-deps: for example, the whole list on Fedora:"
    echo "  dnf install cmake gcc-c++ make pkgconf-pkg-config git nodejs npm jq curl ShellCheck chromium gtest-devel gmock-devel"
    echo "      cli11-devel xxhash-devel libzstd-devel re2-devel openssl-devel hiredis-devel redis haproxy"
    echo "      google-benchmark-devel gnuplot clang compiler-rt"
    echo "install-deps: on Arch:"
    echo "  pacman -S cmake gcc make pkgconf git nodejs npm jq curl shellcheck chromium gtest cli11 xxhash zstd re2 openssl"
    echo "      hiredis redis haproxy benchmark gnuplot clang compiler-rt"
  } >&2
  exit 1
}

if command -v dpkg-query >/dev/null 2>&1; then
  install_debian
elif [[ $(uname -s) == Darwin ]]; then
  install_brew
else
  explain_other
fi

# Node.js for the end-to-end tests.
find_node_dir >/dev/null && exit 0
if [[ $(uname -s) == Linux ]] && install_pinned_node; then
  find_node_dir >/dev/null && exit 0
fi
echo "install-deps: the end-to-end tests need Node.js $node_min_major or later ($(describe_path_node))." >&2
echo "install-deps: install it and put it on PATH (macOS: brew install node)" >&2
exit 1
