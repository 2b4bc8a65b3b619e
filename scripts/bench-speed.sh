#!/usr/bin/env bash
# The speed report (issue 15): in one run on one model, hearth against llama-server and
# llama-batched-bench (all three built from the same llama.cpp source), each figure beside
# the baseline measured in the same run and the target it is held to:
#   cold TTFT       a first prompt of COLD tokens (hearth bench --sweep): hearth ÷
#                   llama-server and hearth ÷ hearth --no-cache, target <= 1.03
#   decode          single-stream decode tokens/s over the chat sessions, cache and
#                   shadows on: hearth ÷ llama-server, target >= 0.97
#   TTFT÷ideal      follow-up TTFT over (its new tokens at the session's cold cost per token
#                   + one decode step), p90 per scenario, target <= 1.15; "at depth" the
#                   same with each prefill costed where it sits (hearth bench --depth-probe)
#   prep_ms         from the request being read to its admission (render, tokenize, cache
#                   lookup), hearth's log, on the follow-ups of one conversation grown to
#                   LONG tokens, target <= 10 ms
#   streams         aggregate decode of N concurrent streams (bench-streams.mjs) ÷
#                   llama-batched-bench's S_TG at batch N, target >= 0.9, in rounds
#   prefilled÷new   per scenario, both servers (what the cache saves)
# For the cold prompts each server runs alone, started and stopped in turn, in rounds
# whose order turns by one each round; for the
# sessions hearth and llama-server are both up and take turns, session by session.
# Nothing else should run on the machine meanwhile.
#
# Usage: scripts/bench-speed.sh
# Env:   PRESET=small|tiny  qwen35 model preset (default small); MODEL=path uses that file
#        HEARTH=path        hearth binary (default build/src/hearth)
#        THREADS=(all cores) CTX=65536 (KV cells of every server) SLOTS=8
#        COLD=40000 COLD_REPS=3   cold prompt size ("" to skip), and how many rounds (one
#                            prompt per server each, new text each round; the report
#                            takes each server's median)
#        SCENARIOS=chat,agent TURNS=8 MAX_TOKENS=64   the sessions
#        LONG=43000 LONG_TURNS=60   the long conversation for prep_ms ("" to skip)
#        STREAMS=4,8 STREAM_TOKENS=128 STREAM_REPS=3 ("" to skip; rounds of batched-bench
#                            and hearth in turn, the first of the two alternating; the
#                            report takes the median of the rounds' ratios)
#        OUT=bench-results/speed-DATE   report.md and one folder per part
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
hearth=${HEARTH:-$root/build/src/hearth}
preset=${PRESET:-small}
out=${OUT:-$root/bench-results/speed-$(date +%Y%m%d-%H%M%S)}
ctx=${CTX:-65536} slots=${SLOTS:-8}
cold=${COLD-40000} cold_reps=${COLD_REPS:-3} long=${LONG-43000} long_turns=${LONG_TURNS:-60}
scenarios=${SCENARIOS:-chat,agent} turns=${TURNS:-8} max_tokens=${MAX_TOKENS:-64}
streams=${STREAMS-4,8} stream_tokens=${STREAM_TOKENS:-128} stream_reps=${STREAM_REPS:-3}
who="bench-speed"
[[ -x "$hearth" ]] || { echo "$who: build hearth first (make build), or set HEARTH" >&2; exit 1; }
command -v jq >/dev/null || { echo "$who: needs jq (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
model=${MODEL:-$out/$preset-qwen35.gguf}
[[ -f "$model" ]] || "$hearth" mkmodel --arch qwen35 --preset "$preset" --out "$model" >&2
llama_bin="$(bash "$here/build-llama.sh")/build/bin"

# shellcheck source=lib/servers.sh
source "$here/lib/servers.sh"
# shellcheck source=lib/node.sh
source "$here/lib/node.sh"
# shellcheck source=lib/host.sh
source "$here/lib/host.sh"
threads=${THREADS:-$(cpu_count)}
trap stop_servers EXIT

start_hearth() {  # NAME PORT CELLS [flags...]: starts hearth serve, logging to OUT/NAME.log
  local name=$1 port=$2 cells=$3
  shift 3
  "$hearth" serve -m "$model" --port "$port" -c "$cells" -P "$slots" -t "$threads" "$@" >"$out/$name.log" 2>&1 &
  pids+=("$!")
  wait_healthy "http://127.0.0.1:$port" "$!" "$out/$name.log"
}
start_llama_server() {  # PORT: starts llama-server with hearth's -c, -P and -t, logging to OUT/llama-server.log
  CTX=$ctx SLOTS=$slots THREADS=$threads LLAMA_SERVER="$llama_bin/llama-server" \
    bash "$here/start-llama-server.sh" "$model" "$1" >>"$out/llama-server.log" 2>&1 &
  pids+=("$!")
  wait_healthy "http://127.0.0.1:$1" "$!" "$out/llama-server.log"
}
hearth_port=$(free_port 18180)
nocache_port=$(free_port $((hearth_port + 1)))
llama_port=$(free_port $((nocache_port + 1)))
h=http://127.0.0.1:$hearth_port n=http://127.0.0.1:$nocache_port l=http://127.0.0.1:$llama_port
bench=("$hearth" bench --render-model "$model" --model-file "$model" --no-plots --no-turn-table -q)

rows=()  # the report's table rows
row() { rows+=("| $1 | $2 | $3 | $4 | $5 |"); }
# ratio A B, fmt V: numbers as the report prints them; "?" for a figure that is missing.
ratio() { jq -nr --argjson a "${1:-null}" --argjson b "${2:-null}" 'if $a == null or $b == null or $b == 0 then "?" else ($a / $b * 1000 | round / 1000) end'; }
fmt() { jq -nr --argjson v "${1:-null}" --argjson k "${2:-10}" 'if $v == null then "?" else ($v * $k | round / $k) end'; }

if [[ -n "$cold" ]]; then
  # Each server alone on the machine, so nothing but the machine's own drift lies between
  # them: with two or three servers loaded (idle but one), prefills of the same length
  # spread over 11.6-15.8 s on a 2-core VM, alone over 11.3-12.9 s minutes before
  # (docs/benchmarks.md, "The speed report"). And in rounds, one prompt per server each,
  # the same text for all three (--seed), the order turned by one each round: that drift
  # runs to 20 % over a few minutes, and server by server in turn it fell on whichever
  # came first or last.
  echo "$who: $cold_reps rounds of one cold prompt of $cold tokens per server, one server at a time" >&2
  mkdir -p "$out/cold"
  : >"$out/cold/rows.jsonl"
  servers=(hearth hearth-no-cache llama-server)
  for ((round = 0; round < cold_reps; round++)); do
    for ((i = 0; i < 3; i++)); do
      name=${servers[$(((round + i) % 3))]}
      case $name in
        hearth) start_hearth hearth-cold "$hearth_port" "$ctx"; url=$h ;;
        hearth-no-cache) start_hearth hearth-no-cache "$nocache_port" "$ctx" --no-cache; url=$n ;;
        llama-server) start_llama_server "$llama_port"; url=$l ;;
      esac
      "${bench[@]}" "$url" --label "$name" --sweep "$cold" --sweep-cold-only --seed "$((7001 + round))" \
        --out "$out/cold/$name-r$round" >/dev/null
      cat "$out/cold/$name-r$round/rows.jsonl" >>"$out/cold/rows.jsonl"
      stop_servers
    done
  done
  ttft() {  # the server's median cold TTFT
    jq -s --arg s "$1" '[.[] | select(.server == $s and .kind == "cold" and .ok) | .ttft_ms] | sort
      | if length == 0 then null else .[length / 2 | floor] end' "$out/cold/rows.jsonl"
  }
  hc=$(ttft hearth) nc=$(ttft hearth-no-cache) lc=$(ttft llama-server)
  row "cold TTFT, $cold tokens (ms, median of $cold_reps)" "$(fmt "$hc")" "llama-server $(fmt "$lc")" "$(ratio "$hc" "$lc")" "<= 1.03"
  row "cold TTFT, $cold tokens (ms, median of $cold_reps)" "$(fmt "$hc")" "hearth --no-cache $(fmt "$nc")" "$(ratio "$hc" "$nc")" "<= 1.03"
fi

start_hearth hearth "$hearth_port" "$ctx"
start_llama_server "$llama_port"
echo "$who: sessions ($scenarios, $turns turns) on hearth and llama-server" >&2
"${bench[@]}" "$h" --compare "$l" --label hearth --label llama-server --scenario "$scenarios" \
  --turns "$turns" --max-tokens "$max_tokens" --out "$out/sessions" >/dev/null
group() { jq --arg s "$1" --arg c "$2" "[.[] | select(.server == \$s and .scenario == \$c)][0]$3" "$out/sessions/summary.json"; }
for sc in ${scenarios//,/ }; do
  ht=$(group hearth "$sc" .decode_tps.p50) lt=$(group llama-server "$sc" .decode_tps.p50)
  row "decode, $sc (tokens/s, p50)" "$(fmt "$ht")" "llama-server $(fmt "$lt")" "$(ratio "$ht" "$lt")" ">= 0.97"
done
for sc in ${scenarios//,/ }; do
  row "follow-up TTFT÷ideal p90, $sc" "$(fmt "$(group hearth "$sc" .ttft_vs_ideal.p90)" 100)" \
    "llama-server $(fmt "$(group llama-server "$sc" .ttft_vs_ideal.p90)" 100)" "" "<= 1.15"
  row "follow-up TTFT÷ideal at depth p90, $sc" "$(fmt "$(group hearth "$sc" .ttft_vs_ideal_at_depth.p90)" 100)" \
    "llama-server $(fmt "$(group llama-server "$sc" .ttft_vs_ideal_at_depth.p90)" 100)" "" "(each prefill at its depth)"
done
for sc in ${scenarios//,/ }; do
  row "prefilled÷new, $sc (session)" "$(fmt "$(group hearth "$sc" .session_prefilled_per_new)" 1000)" \
    "llama-server $(fmt "$(group llama-server "$sc" .session_prefilled_per_new)" 1000)" "" "(what the cache saves)"
done

if [[ -n "$long" ]]; then
  echo "$who: one conversation grown to $long tokens in $long_turns turns, hearth only" >&2
  mark=$(wc -l <"$out/hearth.log")
  "${bench[@]}" "$h" --scenario chat --sessions 1 --turns "$long_turns" --context "$long" --max-tokens 8 \
    --out "$out/long" >/dev/null
  # prep_ms of the requests whose prompt is at least 90 % of LONG: the last turns.
  prep=$(tail -n +"$((mark + 1))" "$out/hearth.log" |
    sed -n 's/^hearth: done prompt=\([0-9]*\) .* prep_ms=\([0-9.]*\) .*/\1 \2/p' |
    awk -v min="$((long * 9 / 10))" '$1 >= min { print $2 }' | jq -s 'sort | {n: length, p50: .[length / 2 | floor], max: max}')
  row "prep_ms at $(( long / 1000 ))k tokens (p50 / max, n)" \
    "$(jq -r '"\(.p50) / \(.max), \(.n)"' <<<"$prep")" "" "" "<= 10"
fi

if [[ -n "$streams" ]]; then
  # In rounds as the cold part, for the same reason: on a shared machine batched-bench's
  # S_TG moved by a third within minutes (docs/benchmarks.md, "Concurrent streams"). Each
  # round runs batched-bench and then hearth, or hearth first every other round, each
  # alone; the ratio reported is the median of the rounds' own ratios.
  node_dir=$(find_node_dir) || { echo "$who: needs Node.js $node_min_major or later (scripts/install-deps.sh)" >&2; exit 1; }
  stop_servers  # llama-batched-bench and hearth alone on the machine, one after the other
  echo "$who: $stream_reps rounds of $streams concurrent streams: llama-batched-bench and hearth in turn" >&2
  mkdir -p "$out/streams"
  : >"$out/streams/rounds.jsonl"
  for ((round = 0; round < stream_reps; round++)); do
    order=(batched-bench hearth)
    ((round % 2)) && order=(hearth batched-bench)
    for name in "${order[@]}"; do
      if [[ $name == batched-bench ]]; then
        "$llama_bin/llama-batched-bench" -m "$model" -c 4096 -npp 128 -ntg "$stream_tokens" -npl "$streams" \
          -t "$threads" >"$out/streams/batched-bench-r$round.txt" 2>&1
      else
        start_hearth hearth-streams-r$round "$hearth_port" 4096  # as batched-bench
        "$node_dir/node" "$here/bench-streams.mjs" "$h" --streams "$streams" --gen-tokens "$stream_tokens" \
          --json "$out/streams/hearth-r$round.json" >"$out/streams/hearth-r$round.txt"
        stop_servers
      fi
    done
    for s in ${streams//,/ }; do
      # batched-bench's table: | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ...
      stg=$(awk -F'|' -v b="$s" '$4 + 0 == b && $9 + 0 > 0 { gsub(/ /, "", $9); print $9; exit }' \
        "$out/streams/batched-bench-r$round.txt")
      hs=$(jq --argjson b "$s" '[.[] | select(.streams == $b)][0].tokens_per_s' "$out/streams/hearth-r$round.json")
      jq -nc --argjson r "$round" --argjson s "$s" --arg first "${order[0]}" --argjson h "${hs:-null}" \
        --argjson b "${stg:-null}" '{round: $r, streams: $s, first: $first, hearth: $h, batched_bench: $b}' \
        >>"$out/streams/rounds.jsonl"
    done
  done
  for s in ${streams//,/ }; do
    # medians of hearth's rate, of batched-bench's, and of the rounds' ratios
    read -r hs stg rs < <(jq -sr --argjson s "$s" '[.[] | select(.streams == $s and .hearth != null and .batched_bench != null)]
      | def med: sort | if length == 0 then null else .[length / 2 | floor] end;
      "\([.[].hearth] | med) \([.[].batched_bench] | med) \([.[] | .hearth / .batched_bench] | med)"' \
      "$out/streams/rounds.jsonl")
    row "$s streams (tokens/s, median of $stream_reps rounds)" "$(fmt "$hs")" "batched-bench S_TG $(fmt "$stg")" \
      "$(fmt "$rs" 1000)" ">= 0.9"
  done
fi

{
  echo "# hearth speed report, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Model \`$(basename "$model")\`, $threads threads, -c $ctx, -P $slots; $(uname -sm)."
  echo
  echo "| measure | hearth | baseline (same run) | ratio | target |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' ${rows[@]+"${rows[@]}"}
} >"$out/report.md"
cat "$out/report.md"
