#!/usr/bin/env bash
# The full side-by-side benchmark behind docs/benchmarks.md: hearth and llama-server (built
# from the same llama.cpp source) on the same random-weight Qwen3.5-shaped model, every
# `hearth bench` scenario, alternating session by session, then the cold/warm sweep and a
# --diagnose of each server. Starts and stops both servers itself.
#
# Usage: scripts/bench-compare.sh [extra hearth bench flags...]
# Env:   PRESET=tiny|small   model preset (default tiny); MODEL=path uses that file instead
#        HEARTH=path         hearth binary (default build/src/hearth)
#        SCENARIOS=all (or e.g. chat,agent)   TURNS=8 REPS=1
#        SLOTS=2 CTX=8192     both servers: parallel slots, KV cells shared by them (with
#                             8192, about 6 of the interleaved scenario's 8 conversations fit
#                             on the device; CTX=3072 SCENARIOS=interleaved leaves room for 2)
#        THREADS=(all cores)
#        SWEEP=256,1024,4096  cold/warm sweep sizes ("" to skip)
#        DIAGNOSE=1           also run --diagnose against each server (0 to skip)
#        STABILIZE=1          also run the volatile scenario against a second hearth started
#                             with --stabilize uuid,timestamp (0 to skip)
#        HEARTH_FLAGS=        extra `hearth serve` flags
#        LLAMA_FLAGS=         extra llama-server flags (gpt-oss's random text: --skip-chat-parsing,
#                             else its harmony parser rejects every reply)
#        OUT=bench-results/compare-DATE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
hearth=${HEARTH:-$root/build/src/hearth}
preset=${PRESET:-tiny}
out=${OUT:-$root/bench-results/compare-$(date +%Y%m%d-%H%M%S)}
turns=${TURNS:-8} reps=${REPS:-1} slots=${SLOTS:-2} ctx=${CTX:-8192} scenarios=${SCENARIOS:-all}
sweep=${SWEEP-256,1024,4096}
[[ -x "$hearth" ]] || { echo "bench-compare: build hearth first (make build), or set HEARTH" >&2; exit 1; }
mkdir -p "$out"
model=${MODEL:-$out/$preset-qwen35.gguf}
if [[ ! -f "$model" ]]; then
  "$hearth" mkmodel --arch qwen35 --preset "$preset" --out "$model" >&2
fi

who=bench-compare
# shellcheck source=lib/servers.sh
source "$here/lib/servers.sh"
trap stop_servers EXIT

threads=()
[[ -n "${THREADS:-}" ]] && threads=(-t "$THREADS")
hearth_port=$(free_port 18080)
read -r -a extra_hearth_flags <<<"${HEARTH_FLAGS:-}"
hearth_flags=(-c "$ctx" -P "$slots" ${threads[@]+"${threads[@]}"} ${extra_hearth_flags[@]+"${extra_hearth_flags[@]}"})
"$hearth" serve -m "$model" --port "$hearth_port" "${hearth_flags[@]}" >"$out/hearth.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_healthy "http://127.0.0.1:$hearth_port" "$pid" "$out/hearth.log"

llama_port=$(free_port $((hearth_port + 1)))
read -r -a extra_llama_flags <<<"${LLAMA_FLAGS:-}"
CTX=$ctx SLOTS=$slots bash "$here/start-llama-server.sh" "$model" "$llama_port" \
  ${extra_llama_flags[@]+"${extra_llama_flags[@]}"} >"$out/llama-server.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_healthy "http://127.0.0.1:$llama_port" "$pid" "$out/llama-server.log"
llama_cmd=$(sed -n 's/^start-llama-server: //p' "$out/llama-server.log" | head -1)

hearth_url=http://127.0.0.1:$hearth_port
llama_url=http://127.0.0.1:$llama_port
common=(--render-model "$model" --model-file "$model" --turns "$turns" --reps "$reps"
        --env "hearth_flags=${hearth_flags[*]}"
        --env "llama_server_command=$llama_cmd"
        --env "hearth_commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet 2>/dev/null || echo -dirty)")

echo "bench-compare: sessions ($scenarios, $turns turns), hearth vs llama-server" >&2
"$hearth" bench "$hearth_url" --compare "$llama_url" --label hearth --label llama-server \
  --scenario "$scenarios" "${common[@]}" --out "$out/sessions" "$@" | tee "$out/sessions.txt"

if [[ -n "$sweep" ]]; then
  echo "bench-compare: cold/warm sweep over $sweep tokens" >&2
  "$hearth" bench "$hearth_url" --compare "$llama_url" --label hearth --label llama-server \
    --sweep "$sweep" "${common[@]}" --out "$out/sweep" --no-turn-table "$@" | tee "$out/sweep.txt"
fi

if [[ "${STABILIZE:-1}" == 1 ]]; then
  stab_port=$(free_port $((llama_port + 1)))
  "$hearth" serve -m "$model" --port "$stab_port" "${hearth_flags[@]}" --stabilize uuid,timestamp \
    >"$out/hearth-stabilize.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_healthy "http://127.0.0.1:$stab_port" "$pid" "$out/hearth-stabilize.log"
  echo "bench-compare: volatile scenario against hearth --stabilize uuid,timestamp" >&2
  "$hearth" bench "http://127.0.0.1:$stab_port" --label "hearth-stabilize" --scenario volatile \
    "${common[@]}" --env "stabilize=uuid,timestamp" --out "$out/volatile-stabilize" "$@" | tee "$out/volatile-stabilize.txt"
fi

if [[ "${DIAGNOSE:-1}" == 1 ]]; then
  for target in "hearth $hearth_url" "llama-server $llama_url"; do
    read -r name url <<<"$target"
    echo "bench-compare: --diagnose $name" >&2
    "$hearth" bench --diagnose "$url" --label "$name" --render-model "$model" --out "$out/diagnose-$name" \
      | tee "$out/diagnose-$name.txt"
  done
fi
echo "bench-compare: everything is in $out" >&2
