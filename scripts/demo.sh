#!/usr/bin/env bash
# `make demo`: what hearth is for, in a few minutes. The same scripted coding-agent session
# (a user request, three tool calls and their results, the model's answer, the next user
# request, ...) runs against hearth and against llama-server built from the same llama.cpp
# (or, where that build has no llama-server, against hearth --no-cache), on the small
# random-weight Qwen3.5-shaped model, made once. Then it prints, turn by turn and side by
# side, the prompt, the tokens new in it, and what each server prefilled and its time to
# first token, and writes the log-log plot of time to first token per turn (SVG; PNG too
# where gnuplot is installed). Both servers are stopped at the end.
#
# Usage: scripts/demo.sh HEARTH MODELS_DIR RESULTS_DIR
# Env:   DEMO_TURNS (default 9: two agent cycles and the user turn after them)
#        DEMO_CONTEXT (default 5000): the last prompt's size in tokens, about
#        DEMO_BASELINE=llama-server|no-cache (default: llama-server where it is built)
#        LLAMA_SERVER: its binary (default: scripts/build-llama.sh's build)
#        THREADS: both servers' threads (default: theirs, all cores)
set -euo pipefail
hearth=$1 models=$2 results=$3
here=$(cd "$(dirname "$0")" && pwd)
who=demo
# shellcheck source=lib/hearth-serve.sh
source "$here/lib/hearth-serve.sh"
# shellcheck source=lib/servers.sh
source "$here/lib/servers.sh"
model="$models/small-qwen35.gguf"
mkdir -p "$models" "$results"
if [[ ! -f "$model" ]]; then
  "$hearth" mkmodel --arch qwen35 --preset small --out "$model"
fi

turns=${DEMO_TURNS:-9} context=${DEMO_CONTEXT:-5000}
llama_server=${LLAMA_SERVER:-$(bash "$here/build-llama.sh" --print-prefix)/build/bin/llama-server}
baseline=${DEMO_BASELINE:-}
if [[ -z $baseline ]]; then
  if [[ -x $llama_server ]]; then baseline=llama-server; else baseline=no-cache; fi
fi
threads=()
[[ -n ${THREADS:-} ]] && threads=(-t "$THREADS")
# The same cells and slots for both servers, as scripts/bench-compare.sh gives them.
ctx=8192 slots=2

stop_demo() {
  local n_started=${#pids[@]}
  stop_servers
  [[ $n_started -gt 0 ]] && echo "demo: stopped the servers"
  return 0
}
trap stop_demo EXIT

echo "demo: starting hearth serve -m $model -c $ctx -P $slots"
start_hearth "$results/hearth.log" "$results/hearth.err" -m "$model" -c "$ctx" -P "$slots" \
  ${threads[@]+"${threads[@]}"} || { echo "demo: hearth serve did not start" >&2; exit 1; }
pids+=("$server_pid")
hearth_url=http://127.0.0.1:$port

case $baseline in
  llama-server)
    [[ -x $llama_server ]] || { echo "demo: no llama-server at $llama_server (DEMO_BASELINE=no-cache)" >&2; exit 1; }
    echo "demo: starting llama-server from the same llama.cpp build ($llama_server)"
    base_port=$(free_port 18090)
    LLAMA_SERVER=$llama_server CTX=$ctx SLOTS=$slots THREADS=${THREADS:-} \
      bash "$here/start-llama-server.sh" "$model" "$base_port" >"$results/llama-server.log" 2>&1 &
    pids+=("$!")
    base_url=http://127.0.0.1:$base_port
    wait_healthy "$base_url" "$!" "$results/llama-server.log"
    base_label=llama-server
    ;;
  no-cache)
    echo "demo: no llama-server built here; comparing with hearth serve --no-cache instead"
    start_hearth "$results/no-cache.log" "$results/no-cache.err" -m "$model" -c "$ctx" -P "$slots" --no-cache \
      ${threads[@]+"${threads[@]}"} || { echo "demo: hearth serve --no-cache did not start" >&2; exit 1; }
    pids+=("$server_pid")
    base_url=http://127.0.0.1:$port
    base_label="hearth --no-cache"
    ;;
  *) echo "demo: DEMO_BASELINE must be llama-server or no-cache, not '$baseline'" >&2; exit 2 ;;
esac

echo "demo: one $turns-turn coding-agent session (growing to about $context tokens) on each server, hearth first"
# Short replies: time to first token is what the demo is about, and decoding is slow on a CPU.
"$hearth" bench "$hearth_url" --compare "$base_url" --label hearth --label "$base_label" \
  --scenario agent --turns "$turns" --context "$context" --system-tokens 300 --max-tokens 8 \
  --render-model "$model" --model-file "$model" --no-turn-table --out "$results" >"$results/bench.txt"
echo
# The side-by-side tables of the summary the bench printed, up to its list of files.
awk '/^### Side by side/ { on = 1 } /^Results: / { on = 0 } on' "$results/bench.txt"
echo "demo: a server that re-prefills the conversation climbs with it; one that prefills only what is new stays flat."
plot=$results/plots/ttft_agent.svg
[[ -f ${plot%.svg}.png ]] && plot="$plot (and ${plot%.svg}.png)"
echo "demo: the plot of time to first token per turn: $plot"
echo "demo: everything else (summary.md, rows.jsonl, the servers' logs) is in $results"
