#!/usr/bin/env bash
# ctest's bench_smoke: starts `hearth serve` on a tiny model, runs `hearth bench` for three
# turns of plain chat against it (between its depth probes), and checks the results folder.
# Usage: bench-smoke-test.sh HEARTH MODEL.gguf
set -euo pipefail
hearth=$1 model=$2
# shellcheck source=lib/hearth-serve.sh
source "$(dirname "$0")/lib/hearth-serve.sh"
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "bench_smoke: $*" >&2; echo "--- server log" >&2; tail -20 "$work/server.err" >&2; exit 1; }

start_hearth "$work/server.out" "$work/server.err" -m "$model" -t 1 || fail "hearth serve did not start"

out="$work/results"
"$hearth" bench "http://127.0.0.1:$port" --scenario chat --turns 3 --system-tokens 60 --user-tokens 40 \
  --max-tokens 8 --warmup 0 --render-model "$model" --out "$out" --quiet >"$work/bench.out" 2>&1 \
  || { cat "$work/bench.out" >&2; fail "hearth bench failed"; }

for f in rows.jsonl turns.csv env.json summary.json summary.md plots/plots.gp; do
  [[ -s "$out/$f" ]] || fail "missing $f"
done
if command -v gnuplot >/dev/null; then
  [[ -s "$out/plots/ttft_vs_context.png" && -s "$out/plots/prefilled_chat.png" ]] || fail "gnuplot present but no PNGs"
fi
[[ $(wc -l <"$out/rows.jsonl") -eq 5 ]] || fail "rows.jsonl should have 5 rows (the depth probe before and after 3 turns)"
jq -se '[.[] | select(.scenario == "probe")] | length == 2 and all(.kind == "cold" and .ok and .prompt_tokens >= 200)' \
  "$out/rows.jsonl" >/dev/null \
  || fail "rows.jsonl lacks the depth probes' cold prompts"
jq -se '.[0].scenario == "probe" and .[-1].scenario == "probe"' "$out/rows.jsonl" >/dev/null \
  || fail "the depth probes should come before and after the sessions"
# Header, the probes, and one row per turn: every turn succeeded, turns 0..2, new tokens counted.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
         $col["scenario"] == "probe" { next }
         { n++
           if ($col["ok"] != 1) bad = bad " turn " $col["turn"] " failed;"
           if ($col["turn"] != n - 1) bad = bad " turn order;"
           if ($col["new_tokens"] == "" || $col["prompt_tokens"] == "") bad = bad " token counts missing;"
           if ($col["scenario"] != "chat" || $col["server"] != "hearth") bad = bad " labels;" }
         END { if (n != 3) bad = bad " " n " rows;"; if (bad != "") { print bad; exit 1 } }' "$out/turns.csv" \
  || { cat "$out/turns.csv" >&2; fail "turns.csv is not as expected"; }
grep -q '"cpu"' "$out/env.json" || fail "env.json lacks the host"
jq -e 'length == 1 and .[0].server == "hearth" and .[0].scenario == "chat" and .[0].turns == 3 and .[0].errors == 0
       and .[0].ttft_first_ms.n == 1 and .[0].ttft_follow_up_ms.n == 2' "$out/summary.json" >/dev/null \
  || { cat "$out/summary.json" >&2; fail "summary.json is not as expected"; }
grep -q "Per turn" "$work/bench.out" || fail "no per-turn table printed"
echo "bench_smoke: ok"
