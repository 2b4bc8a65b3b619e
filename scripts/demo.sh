#!/usr/bin/env bash
# `make demo`: makes the small random-weight Qwen3.5-shaped model (once), starts
# `hearth serve` on it, runs a short multi-turn chat session with `hearth bench`, prints
# the per-turn table and where the results and plots are, and stops the server.
# Usage: scripts/demo.sh HEARTH MODELS_DIR RESULTS_DIR
# Env:   DEMO_TURNS (default 4)
set -euo pipefail
hearth=$1 models=$2 results=$3
# shellcheck source=lib/hearth-serve.sh
source "$(dirname "$0")/lib/hearth-serve.sh"
model="$models/small-qwen35.gguf"
mkdir -p "$models"
if [[ ! -f "$model" ]]; then
  "$hearth" mkmodel --arch qwen35 --preset small --out "$model"
fi

log=$(mktemp)
server_pid=
stop() {
  if [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; then
    wait "$server_pid" 2>/dev/null || true
    echo "demo: stopped hearth serve"
  fi
  rm -f "$log" "$log.err"
}
trap stop EXIT

echo "demo: starting hearth serve -m $model"
start_hearth "$log" "$log.err" -m "$model" || { echo "demo: hearth serve did not start" >&2; exit 1; }
echo "demo: hearth is listening on 127.0.0.1:$port; a ${DEMO_TURNS:-4}-turn chat session follows"

# A demonstration, not the full benchmark (scripts/bench-compare.sh): short messages so
# it fits a few minutes on two cores.
"$hearth" bench "http://127.0.0.1:$port" --scenario chat --turns "${DEMO_TURNS:-4}" \
  --system-tokens 150 --user-tokens 60 --max-tokens 12 \
  --render-model "$model" --model-file "$model" --out "$results"
echo
echo "demo: prefilled = prompt tokens the server computed; new = tokens new in the request."
echo "demo: results, plots and the summary are in $results"
