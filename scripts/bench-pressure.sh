#!/usr/bin/env bash
# The memory-pressure measurement behind docs/benchmarks.md ("Memory pressure"): hearth and
# llama-server on the same model, the same KV cells (-c) and parallel slots, each at its
# own defaults otherwise, running a grid of conversations × conversation lengths, one turn
# of each conversation in turn (`hearth bench --pressure`), then one point with every
# flagged follow-up listed. Starts and stops both servers itself.
#
# Usage: scripts/bench-pressure.sh [extra hearth bench flags...]
# Env:   PRESET=tiny|small  model preset (default tiny); MODEL=path uses that file instead
#        HEARTH=path        hearth binary (default build/src/hearth)
#        CTX=8192 SLOTS=2   both servers' KV cells and parallel slots
#        THREADS=N          both servers' threads (default: theirs; 1 on a loaded machine,
#                           where threads spinning on shared cores cost more than they give)
#        CONVS=2,4,8,16,32  conversations per point
#        LENGTHS=1024,2048,4096   tokens per conversation at its last turn (each must fit in
#                           CTX; for 32k conversations run with CTX=65536 and a longer list)
#        TURNS=4            turns per conversation
#        POINT=8:2400       the single point run with its flagged follow-ups ("" to skip)
#        MAX_TOKENS=16      reply length
#        OUT=bench-results/pressure-DATE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
hearth=${HEARTH:-$root/build/src/hearth}
preset=${PRESET:-tiny}
out=${OUT:-$root/bench-results/pressure-$(date +%Y%m%d-%H%M%S)}
ctx=${CTX:-8192} slots=${SLOTS:-2} turns=${TURNS:-4} max_tokens=${MAX_TOKENS:-16}
convs=${CONVS:-2,4,8,16,32} lengths=${LENGTHS:-1024,2048,4096} point=${POINT-8:2400}
[[ -x "$hearth" ]] || { echo "bench-pressure: build hearth first, or set HEARTH" >&2; exit 1; }
mkdir -p "$out"
model=${MODEL:-$out/$preset-qwen35.gguf}
[[ -f "$model" ]] || "$hearth" mkmodel --arch qwen35 --preset "$preset" --out "$model" >&2

who=bench-pressure
# shellcheck source=lib/servers.sh
source "$here/lib/servers.sh"
trap stop_servers EXIT

# Fresh servers for each run, so one run's cache does not carry into the next.
start_servers() {  # TAG
  hearth_port=$(free_port 18280)
  "$hearth" serve -m "$model" --port "$hearth_port" -c "$ctx" -P "$slots" ${THREADS:+-t "$THREADS"} \
    >"$out/hearth-$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_healthy "http://127.0.0.1:$hearth_port" "$pid" "$out/hearth-$1.log"
  llama_port=$(free_port $((hearth_port + 1)))
  CTX=$ctx SLOTS=$slots THREADS=${THREADS:-} bash "$here/start-llama-server.sh" "$model" "$llama_port" >"$out/llama-server-$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_healthy "http://127.0.0.1:$llama_port" "$pid" "$out/llama-server-$1.log"
}
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo -dirty)
run_bench() {  # TAG GRID [flags...]
  local tag=$1 grid=$2
  shift 2
  start_servers "$tag"
  "$hearth" bench "http://127.0.0.1:$hearth_port" --compare "http://127.0.0.1:$llama_port" \
    --label hearth --label llama-server --pressure "$grid" --pressure-turns "$turns" --device-cells "$ctx" \
    --max-tokens "$max_tokens" --render-model "$model" --model-file "$model" --no-turn-table \
    --env "hearth_flags=-c $ctx -P $slots${THREADS:+ -t $THREADS}" --env "hearth_commit=$commit" \
    --out "$out/$tag" "$@" >"$out/$tag.txt" 2>"$out/$tag.progress"
  stop_servers
  # Why hearth's reuse stopped short, per request, from its own log.
  grep -o 'reuse_stopped: .*' "$out/hearth-$tag.log" | sort | uniq -c | sort -rn >"$out/hearth-$tag.reuse-stopped.txt" || true
  awk '/^## Memory pressure/{on=1; print; next} on && /^##/{exit} on' "$out/$tag.txt"
}

echo "bench-pressure: grid $convs:$lengths, -c $ctx -P $slots, $turns turns" >&2
run_bench grid "$convs:$lengths" "$@"
if [[ -n "$point" ]]; then
  echo "bench-pressure: one point, $point" >&2
  run_bench point "$point" "$@"
fi
echo "bench-pressure: everything is in $out (plot: $out/grid/plots/pressure.png)" >&2
