#!/usr/bin/env bash
# ctest's install_deps: scripts/install-deps.sh on machines faked by a PATH of stand-ins
# (uname, dpkg-query, apt-get, brew, id, node, ...): Debian installs what dpkg lacks, or
# says what to run when not root; macOS installs the Homebrew formulas that are missing
# (Node.js only when no node on PATH is new enough); any other system is told what to
# install and the script fails, never silently.
# Usage: tests/scripts/install-deps-test.sh
set -uo pipefail  # no -e: each check looks at a status
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
check() {  # WHAT CONDITION-STATUS (0 = holds) [context]
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "install-deps-test: FAILED: $1" >&2; echo "${3:-}" >&2; fi
}

# machine NAME OS [tool=script...]: a folder holding a uname that answers OS, links to
# the few real tools the script needs, and stand-ins given as NAME='shell body'.
machine() {
  local dir=$work/$1 os=$2 t
  shift 2
  mkdir -p "$dir"
  for t in dirname sed grep cat; do ln -sf "$(command -v "$t")" "$dir/$t"; done
  printf '#!/bin/sh\necho %s\n' "$os" >"$dir/uname"
  chmod +x "$dir/uname"
  for t in "$@"; do printf '#!/bin/sh\n%s\n' "${t#*=}" >"$dir/${t%%=*}"; done
  for t in "$@"; do chmod +x "$dir/${t%%=*}"; done
  echo "$dir"
}
# run_on DIR: install-deps.sh with only DIR on PATH and an empty build cache; sets out and rc.
run_on() {
  rc=0
  out=$(PATH=$1 HEARTH_CACHE=$work/cache HOMEBREW_PREFIX=$work/no-brew HEARTH_CHROMIUM="" /bin/bash "$root/scripts/install-deps.sh" 2>&1) || rc=$?
}
has() { [[ $out == *"$1"* ]]; }
node22='echo v22.5.0'
log=$work/calls

# Debian, not root: jq is missing; the apt-get line to run is printed and nothing installed.
# shellcheck disable=SC2016  # $3: the stand-in's own argument
dir=$(machine debian-user Linux id='echo 1000' node="$node22" \
  dpkg-query='[ "$3" = jq ] || echo "install ok installed"' \
  cmake=: g++=: make=: pkg-config=: git=: npm=: apt-get="echo apt-get \$* >>$log")
run_on "$dir"
check "Debian, not root: exits 1" "$((rc != 1))" "$out"
has "sudo apt-get install -y jq"; check "Debian, not root: says what to run" $? "$out"
[[ ! -f $log ]]; check "Debian, not root: installs nothing" $?

# Debian, root: apt-get installs exactly what is missing.
# shellcheck disable=SC2016  # $3: the stand-in's own argument
dir=$(machine debian-root Linux id='echo 0' node="$node22" \
  dpkg-query='case "$3" in shellcheck|libre2-dev) ;; *) echo "install ok installed" ;; esac' \
  cmake=: g++=: make=: pkg-config=: git=: npm=: apt-get="echo apt-get \$* >>$log")
run_on "$dir"
check "Debian, root: exits 0" "$rc" "$out"
[[ $(cat "$log") == "apt-get update -qq
apt-get install -y -qq libre2-dev shellcheck" ]]; check "Debian, root: apt-get installs what is missing" $? "$(cat "$log")"
rm -f "$log"

# macOS with Homebrew: the formulas not installed yet, no node while PATH's is new enough.
brew="case \"\$1\" in list) grep -qx \"\$3\" $work/brewed ;; install) echo brew \$* >>$log ;; esac"
printf '%s\n' cmake pkgconf zstd openssl@3 gnuplot jq >"$work/brewed"
dir=$(machine mac Darwin brew="$brew" c++=: git=: make=: node="$node22" chromium=:)
run_on "$dir"
check "macOS: exits 0" "$rc" "$out"
[[ $(cat "$log") == "brew install googletest cli11 xxhash re2 hiredis redis haproxy google-benchmark shellcheck" ]]
check "macOS: brew installs the missing formulas" $? "$(cat "$log")"
rm -f "$log"
dir=$(machine mac-oldnode Darwin brew="$brew" c++=: git=: make=: node='echo v18.19.0')
run_on "$dir"
[[ $(cat "$log") == "brew install googletest cli11 xxhash re2 hiredis redis haproxy google-benchmark shellcheck node
brew install --cask chromium" ]]
check "macOS, node 18 and no chromium: brew installs both" $? "$(cat "$log")"
rm -f "$log"

# macOS without Homebrew: told so, exit 1.
dir=$(machine mac-nobrew Darwin c++=: git=: make=: node="$node22")
run_on "$dir"
check "macOS without brew: exits 1" "$((rc != 1))" "$out"
has "Homebrew"; check "macOS without brew: names Homebrew" $? "$out"

# Another Linux, nothing there: every command and library named, exit 1.
dir=$(machine fedora Linux node="$node22")
run_on "$dir"
check "other Linux: exits 1" "$((rc != 1))" "$out"
has "commands: cmake g++ make pkg-config git npm jq curl shellcheck redis-server haproxy chromium"; check "other Linux: names the commands" $? "$out"
has "libraries (pkg-config names, with their headers): gtest gmock CLI11 libxxhash libzstd re2 libcrypto hiredis"
check "other Linux: names the libraries" $? "$out"
# ... and with everything there it goes on, quietly.
dir=$(machine fedora-ready Linux node="$node22" cmake=: g++=: make=: pkg-config=: git=: npm=: jq=: curl=: shellcheck=: redis-server=: haproxy=: chromium-browser=:)
run_on "$dir"
check "other Linux, all there: exits 0" "$rc" "$out"

echo "install-deps-test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
