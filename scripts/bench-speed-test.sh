#!/usr/bin/env bash
# ctest's bench_speed: scripts/bench-speed.sh at toy sizes on a tiny model (every part:
# cold prompts, chat sessions, the long conversation, two streams against
# llama-batched-bench; cold prompts and streams in two rounds), then checks that report.md
# has every row with hearth's figure and its baseline measured. Times are not judged: this
# guards the script, not the speed.
# Usage: bench-speed-test.sh HEARTH MODEL.gguf
set -euo pipefail
hearth=$1 model=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "bench_speed: $*" >&2; [[ -f $work/report.md ]] && cat "$work/report.md" >&2; tail -20 "$work/run.log" >&2; exit 1; }

HEARTH=$hearth MODEL=$model OUT=$work THREADS=1 CTX=4096 SLOTS=2 COLD=600 COLD_REPS=2 SCENARIOS=chat \
  TURNS=2 MAX_TOKENS=8 LONG=1500 LONG_TURNS=4 STREAMS=2 STREAM_TOKENS=16 STREAM_REPS=2 \
  bash "$here/bench-speed.sh" >"$work/run.log" 2>&1 || fail "bench-speed.sh failed"
[[ -s $work/report.md ]] || fail "no report.md"
# measure prefix | baseline names (empty: none) | with a ratio
expect() {
  local line
  line=$(grep -F "| $1" "$work/report.md" | head -1) || fail "no row '$1'"
  # | measure | hearth | baseline | ratio | target |
  awk -F'|' -v base="$2" -v ratio="$3" '{
      gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $4); gsub(/^ +| +$/, "", $5)
      if ($3 == "" || $3 ~ /\?/) { print "no hearth figure"; exit 1 }
      if (base != "" && ($4 !~ base || $4 ~ /\?/)) { print "no baseline " base; exit 1 }
      if (ratio == "yes" && $5 !~ /^[0-9.]+$/) { print "no ratio"; exit 1 }
    }' <<<"$line" || fail "row '$1' is incomplete: $line"
}
expect "cold TTFT, 600 tokens" "llama-server" yes
[[ $(grep -c -F "| cold TTFT, 600 tokens" "$work/report.md") -eq 2 ]] || fail "cold TTFT needs two rows"
grep -q -F "hearth --no-cache" "$work/report.md" || fail "no --no-cache baseline"
# The cold part sends each server one prompt a round, never again warm (the report reads
# no warm rows), the order turned by one the second round.
order=$(jq -sc '[.[] | select(.kind == "cold") | .server]' "$work/cold/rows.jsonl")
[[ $order == '["hearth","hearth-no-cache","llama-server","hearth-no-cache","llama-server","hearth"]' ]] ||
  fail "the cold part ran $order"
[[ $(jq -s '[.[] | select(.kind == "warm")] | length' "$work/cold/rows.jsonl") -eq 0 ]] || fail "a cold prompt was sent again"
# Each server took its cold prompt alone: one bench run per server and round, with only that server.
for round in 0 1; do
  for name in hearth hearth-no-cache llama-server; do
    [[ $(jq '.servers | length' "$work/cold/$name-r$round/env.json") -eq 1 ]] || fail "the cold run of $name saw other servers"
  done
done
expect "decode, chat" "llama-server" yes
expect "follow-up TTFT÷ideal p90, chat" "" no
expect "prefilled÷new, chat" "llama-server" no
expect "prep_ms at 1k tokens" "" no
expect "2 streams" "batched-bench S_TG" yes
# The streams in two rounds, each with both figures, batched-bench first and then hearth.
firsts=$(jq -sc '[.[] | select(.hearth != null and .batched_bench != null) | .first]' "$work/streams/rounds.jsonl")
[[ $firsts == '["batched-bench","hearth"]' ]] || fail "the streams rounds ran $firsts first"
echo "bench_speed: ok"
