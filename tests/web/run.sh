#!/usr/bin/env bash
# The web page in a real headless browser: Debian's chromium, driven through the DevTools
# protocol by tests/web/page.test.mjs (Node.js's own WebSocket, no npm package), against
# `hearth serve` on the tiny random-weight qwen35 model with an API key.
#
# Usage: tests/web/run.sh BUILD_DIR
#   HEARTH_WEB_SCREENSHOTS=docs/img  also writes the screenshots there (they always go to
#                                    BUILD_DIR/web/).
#
# Fails, saying so, when Node.js 22 or chromium is missing (scripts/install-deps.sh
# installs both): a browser that cannot run is a failure, never a skip.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
hearth=$build/src/hearth
model=$build/testdata/tiny-qwen35.gguf
out=$build/web
api_key="hearth-web-key"

# shellcheck source=../../scripts/lib/node.sh
source "$here/../../scripts/lib/node.sh"
if ! node_dir=$(find_node_dir); then
  echo "web: FAILED: Node.js $node_min_major or later is needed ($(describe_path_node)); run scripts/install-deps.sh" >&2
  exit 1
fi
export PATH="$node_dir:$PATH"
# Debian's chromium, or on macOS Homebrew's (a cask) or Google Chrome.
mac_chrome="/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"
chromium=${HEARTH_CHROMIUM:-$(command -v chromium || command -v chromium-browser || { [[ -x $mac_chrome ]] && echo "$mac_chrome"; } || true)}
[[ -n $chromium ]] || { echo "web: FAILED: chromium is needed (run scripts/install-deps.sh)" >&2; exit 1; }
[[ -x $hearth ]] || { echo "web: $hearth is not built" >&2; exit 1; }
[[ -f $model ]] || bash "$here/../../scripts/make-test-models.sh" "$hearth" "$build/testdata"

rm -rf "$out"
mkdir -p "$out"
: >"$out/hearth.stdout"  # read below before the server has written to it
"$hearth" serve -m "$model" --port 0 --ctx-size 16384 --parallel 2 --api-key "$api_key" \
  >"$out/hearth.stdout" 2>"$out/hearth.log" &
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
    echo "web: hearth serve exited before listening:" >&2
    cat "$out/hearth.log" >&2
    exit 1
  fi
  sleep 0.1
done
[[ -n $port ]] || { echo "web: hearth serve did not start listening" >&2; exit 1; }
echo "web: hearth serve on 127.0.0.1:$port, $("$chromium" --version 2>/dev/null | head -1), Node.js $(node --version)" >&2

export HEARTH_URL=http://127.0.0.1:$port
export HEARTH_API_KEY=$api_key
export HEARTH_CHROMIUM=$chromium
export HEARTH_WEB_OUT=$out
if [[ -n ${HEARTH_WEB_SCREENSHOTS:-} ]]; then
  mkdir -p "$HEARTH_WEB_SCREENSHOTS"
  HEARTH_WEB_SCREENSHOTS=$(cd "$HEARTH_WEB_SCREENSHOTS" && pwd)  # the tests run in tests/web
  export HEARTH_WEB_SCREENSHOTS
fi
status=0
(cd "$here" && node --test --test-concurrency=1 --test-reporter=spec "$here/page.test.mjs") || status=$?
if [[ $status -ne 0 ]]; then
  echo "web: FAILED; last lines of the server log:" >&2
  tail -n 40 "$out/hearth.log" >&2
fi
exit "$status"
