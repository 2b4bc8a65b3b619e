#!/usr/bin/env bash
# Shadow prefill's two sides in one run: decode speed and follow-up reuse (prefilled ÷
# new) of hearth with each --shadow-prefill policy (docs/cache.md, "Shadow prefill"), on
# the same model and workload, the servers measured alternately session by session. Twice:
# a client that answers at once (no idle time for warm-ahead) and one that pauses.
# `hearth bench` prints the ratios against the first server (after-reply).
#
# Usage: scripts/bench-shadow.sh [extra hearth bench flags...]
# Env:   PRESET=tiny|small   qwen35 model preset (default tiny); MODEL=path uses that file
#        HEARTH=path         hearth binary (default build/src/hearth)
#        POLICIES="after-reply with-decode off"   one server each, in this order
#        SCENARIOS=chat,agent TURNS=6 REPS=2 MAX_TOKENS=64 THINK_MS="0 2000"
#        THREADS=1 SLOTS=2 CTX=8192 HEARTH_FLAGS= (more `hearth serve` flags, e.g. -fa off)
#        OUT=bench-results/shadow-DATE
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
hearth=${HEARTH:-$root/build/src/hearth}
preset=${PRESET:-tiny}
out=${OUT:-$root/bench-results/shadow-$(date +%Y%m%d-%H%M%S)}
read -r -a policies <<<"${POLICIES:-after-reply with-decode off}"
read -r -a think <<<"${THINK_MS:-0 2000}"
(( ${#policies[@]} > 0 )) || { echo "bench-shadow: POLICIES names no policy" >&2; exit 1; }
[[ -x "$hearth" ]] || { echo "bench-shadow: build hearth first (make build), or set HEARTH" >&2; exit 1; }
mkdir -p "$out"
model=${MODEL:-$out/$preset-qwen35.gguf}
[[ -f "$model" ]] || "$hearth" mkmodel --arch qwen35 --preset "$preset" --out "$model" >&2

who=bench-shadow
# shellcheck source=lib/servers.sh
source "$here/lib/servers.sh"
trap stop_servers EXIT

read -r -a extra <<<"${HEARTH_FLAGS:-}"
flags=(-c "${CTX:-8192}" -P "${SLOTS:-2}" -t "${THREADS:-1}" ${extra[@]+"${extra[@]}"})
urls=() labels=()
port=18180
for policy in ${policies[@]+"${policies[@]}"}; do
  port=$(free_port $((port + 1)))
  "$hearth" serve -m "$model" --port "$port" "${flags[@]}" --shadow-prefill "$policy" >"$out/hearth-$policy.log" 2>&1 &
  pids+=("$!")
  wait_healthy "http://127.0.0.1:$port" "$!" "$out/hearth-$policy.log"
  urls+=("http://127.0.0.1:$port")
  labels+=(--label "$policy")
done
compare=()
for u in "${urls[@]:1}"; do compare+=(--compare "$u"); done

for ms in ${think[@]+"${think[@]}"}; do
  echo "bench-shadow: ${policies[*]:-}, think ${ms} ms" >&2
  "$hearth" bench "${urls[0]}" ${compare[@]+"${compare[@]}"} ${labels[@]+"${labels[@]}"} --alternate session \
    --scenario "${SCENARIOS:-chat,agent}" --turns "${TURNS:-6}" --reps "${REPS:-2}" --sessions 1 \
    --max-tokens "${MAX_TOKENS:-64}" --think-ms "$ms" --render-model "$model" --model-file "$model" \
    --env "hearth_flags=${flags[*]}" --env "think_ms=$ms" --no-plots --no-turn-table \
    --env "hearth_commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
    --out "$out/think-$ms" "$@" | tee "$out/think-$ms.txt"
done
echo "bench-shadow: everything is in $out" >&2
