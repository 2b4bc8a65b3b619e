#!/usr/bin/env bash
# End-to-end tests: the official OpenAI and Anthropic SDKs and Claude Code against a real
# `hearth serve` running the tiny random-weight qwen35 model.
#
# Usage: tests/e2e/run.sh BUILD_DIR
#
# Installs the pinned npm packages (npm ci, from npm's own cache when it can) when
# node_modules is missing or does not match package-lock.json, starts the server on a
# free port, runs every *.test.js with node's test runner, and stops the server.
# Exits 77 (ctest's "skipped") when Node.js or npm is not installed.
# Logs and captured requests go to BUILD_DIR/e2e/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
hearth=$build/src/hearth
model=$build/testdata/tiny-qwen35.gguf
out=$build/e2e
api_key=hearth-e2e-key

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "e2e: SKIPPED: node and npm are needed (Node.js 20 or later)" >&2
  exit 77
fi
[[ -x $hearth ]] || { echo "e2e: $hearth is not built" >&2; exit 1; }
[[ -f $model ]] || bash "$here/../../scripts/make-test-models.sh" "$hearth" "$build/testdata"

# node_modules is current when the lock file it was installed from is unchanged.
lock_sum=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
stamp=$here/node_modules/.hearth-lock-sha256
if [[ ! -f $stamp || $(cat "$stamp") != "$lock_sum" ]]; then
  echo "e2e: npm ci" >&2
  (cd "$here" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
  echo "$lock_sum" >"$stamp"
fi

rm -rf "$out"
mkdir -p "$out"
# 64k context: Claude Code's system prompt and tool schemas alone are tens of thousands
# of tokens. A 1 MiB body limit keeps the over-limit test cheap.
"$hearth" serve -m "$model" --port 0 --ctx-size 65536 --parallel 4 --api-key "$api_key" \
  --max-body 1048576 >"$out/hearth.stdout" 2>"$out/hearth.log" &
server_pid=$!
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
export HEARTH_CTX=65536
export HEARTH_MAX_BODY=1048576
export HEARTH_E2E_OUT=$out
export HEARTH_BIN=$hearth
export HEARTH_MODEL=$model
status=0
(cd "$here" && node --test --test-concurrency=1 --test-reporter=spec "$here"/*.test.js) || status=$?
if [[ $status -ne 0 ]]; then
  echo "e2e: FAILED; last lines of the server log:" >&2
  tail -n 40 "$out/hearth.log" >&2
fi
exit "$status"
