#!/usr/bin/env bash
# End-to-end tests: the official OpenAI and Anthropic SDKs and the coding agents (Claude
# Code, opencode, Qwen Code, Codex CLI) against a real `hearth serve` running the tiny
# random-weight qwen35 model.
#
# Usage: tests/e2e/run.sh BUILD_DIR [--install | NAME FILE.test.js...]
#   no NAME:   every *.test.js against one server, logs in BUILD_DIR/e2e/all/
#   NAME FILE: those test files against a server of their own, logs in BUILD_DIR/e2e/NAME/
#              (ctest runs the SDKs and each agent so, side by side)
#   --install: only install the npm packages (ctest's e2e_packages, which the others need,
#              so that two runs never install at once)
#
# Runs on Node.js 22 or later (what the pinned packages need): the one
# scripts/install-deps.sh installed into the build cache, else the one on PATH; fails,
# saying so, when there is none (a missing client must fail, never skip). Installs the
# pinned npm packages (from npm's own cache when it can) when node_modules is
# missing or was installed from another package-lock.json or Node.js, starts the server
# on a free port, runs the test files with node's test runner, and stops the server.
# Captured requests go to the logs folder too.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [--install | NAME FILE.test.js...]}" && pwd)
shift
install_only=0 name=all files=()
if [[ ${1:-} == --install ]]; then
  install_only=1
elif [[ $# -gt 0 ]]; then
  name=$1
  shift
  [[ $# -gt 0 ]] || { echo "e2e: NAME needs test files after it" >&2; exit 2; }
  for f in "$@"; do
    [[ -f $here/$f ]] || { echo "e2e: no test file $here/$f" >&2; exit 2; }
    files+=("$here/$f")
  done
fi
[[ ${#files[@]} -gt 0 ]] || files=("$here"/*.test.js)
hearth=$build/src/hearth
model=$build/testdata/tiny-qwen35.gguf
out=$build/e2e/$name
api_key="hearth-e2e-key"
other_api_key="hearth-e2e-other-key"  # a second client, which must never see the first's

# shellcheck source=../../scripts/lib/node.sh
source "$here/../../scripts/lib/node.sh"
if ! node_dir=$(find_node_dir); then
  echo "e2e: FAILED: Node.js $node_min_major or later is needed ($(describe_path_node)); run scripts/install-deps.sh" >&2
  exit 1
fi
export PATH="$node_dir:$PATH"
node_version=$(node --version)
[[ $(node_major node) -ge $node_min_major ]] || { echo "e2e: FAILED: node on PATH is $node_version" >&2; exit 1; }
command -v npm >/dev/null || { echo "e2e: FAILED: npm is needed (run scripts/install-deps.sh)" >&2; exit 1; }
echo "e2e: Node.js $node_version ($node_dir/node)" >&2
[[ -x $hearth ]] || { echo "e2e: $hearth is not built" >&2; exit 1; }
[[ -f $model ]] || bash "$here/../../scripts/make-test-models.sh" "$hearth" "$build/testdata"

# node_modules is current when the lock file and the Node.js it was installed with are unchanged.
sha256() { if command -v sha256sum >/dev/null; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1; }
lock_sum="$(sha256 "$here/package-lock.json") node $node_version"
stamp=$here/node_modules/.hearth-lock-sha256
if [[ ! -f $stamp || $(cat "$stamp") != "$lock_sum" ]]; then
  # Not `npm ci`: it refuses a lock file whose optional per-platform packages (opencode's
  # and Qwen Code's binaries for other systems) are missing, and a registry mirror that
  # carries only this platform's leaves them out of the lock. `npm install --no-save`
  # installs the locked versions and leaves package-lock.json as committed.
  echo "e2e: npm install (locked versions)" >&2
  (cd "$here" && npm install --no-save --no-audit --no-fund --prefer-offline --loglevel=error)
  echo "$lock_sum" >"$stamp"
fi
[[ $install_only == 1 ]] && exit 0

rm -rf "$out"
mkdir -p "$out"
# The port is read from hearth.stdout, which must exist before the server (started in
# the background) opens it.
: >"$out/hearth.stdout"
# 64k context: Claude Code's system prompt and tool schemas alone are tens of thousands
# of tokens. A 1 MiB body limit keeps the over-limit test cheap.
"$hearth" serve -m "$model" --port 0 --ctx-size 65536 --parallel 4 \
  --api-key "$api_key" --api-key "$other_api_key" \
  --max-body 1048576 >"$out/hearth.stdout" 2>"$out/hearth.log" &
server_pid=$!
# shellcheck disable=SC2317  # run by the EXIT trap
stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
trap stop_server EXIT

port=
for _ in $(seq 1 600); do
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$out/hearth.stdout")
  [[ -n $port ]] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "e2e: hearth serve exited before listening:" >&2
    cat "$out/hearth.log" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -n $port ]] || { echo "e2e: hearth serve did not start listening" >&2; exit 1; }
echo "e2e: hearth serve on 127.0.0.1:$port (log: $out/hearth.log)" >&2

export HEARTH_URL=http://127.0.0.1:$port
export HEARTH_API_KEY=$api_key
export HEARTH_OTHER_API_KEY=$other_api_key
export HEARTH_CTX=65536
export HEARTH_MAX_BODY=1048576
export HEARTH_E2E_OUT=$out
export HEARTH_BIN=$hearth
export HEARTH_MODEL=$model
status=0
(cd "$here" && node --test --test-concurrency=1 --test-reporter=spec ${files[@]+"${files[@]}"}) || status=$?
if [[ $status -ne 0 ]]; then
  echo "e2e: FAILED; last lines of the server log:" >&2
  tail -n 40 "$out/hearth.log" >&2
fi
exit "$status"
