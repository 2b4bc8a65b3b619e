#!/usr/bin/env bash
# ctest's cluster: three `hearth serve` replicas sharing one cache through Redis, behind
# HAProxy (scripts/cluster.sh, on the tiny qwen35 model), checked from the bench's turns.csv:
#  1. round-robin (every turn on another replica than the last): the chat, agent and
#     interleaved scenarios answer every turn, and every follow-up has prefilled ÷ new
#     <= 1.05, so each resumed from what another replica wrote to Redis;
#  2. fault: with affinity, the replica holding a conversation is killed (kill -9) between
#     turns; the next turns answer on another replica at the same bound.
# Needs redis-server and haproxy (scripts/install-deps.sh) and a hearth with --cache-redis;
# fails, saying which, without them.
# Usage: tests/cluster/run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
hearth=$build/src/hearth
model=$build/testdata/tiny-qwen35.gguf
out=$build/cluster-test
max_ratio=1.05
fail() { echo "cluster: FAILED: $*" >&2; exit 1; }

[[ -x $hearth ]] || fail "$hearth is not built"
[[ -f $model ]] || bash "$here/../../scripts/make-test-models.sh" "$hearth" "$build/testdata"
"$hearth" serve --help 2>&1 | grep -q -- '--cache-redis' \
  || fail "this hearth serve has no --cache-redis: the shared tier (issue 19) is not built in"
rm -rf "$out"
CLUSTER_MODEL=$model CLUSTER_MODES="roundrobin fault" CLUSTER_TURNS=4 CLUSTER_THINK_MS=1500 \
  bash "$here/../../scripts/cluster.sh" "$hearth" "$build/testdata" "$out" \
  || { for f in "$out"/logs/replica-*.log; do [[ -f $f ]] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
       fail "scripts/cluster.sh failed (logs: $out/logs)"; }

# check_follow_ups MODE SCENARIOS: every row of MODE's turns.csv answered; each scenario in
# SCENARIOS (space-separated) has follow-ups; each follow-up within max_ratio.
check_follow_ups() {
  local csv=$out/$1/turns.csv
  [[ -s $csv ]] || fail "$1: no $csv"
  awk -F, -v want="$2" -v max="$max_ratio" -v mode="$1" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    { s = $col["scenario"]; where = mode " " s " session " $col["session"] " turn " $col["turn"] + 1 }
    $col["ok"] != 1 { bad = bad "\n  " where ": request failed: " $col["error"]; next }
    $col["turn"] == 0 || $col["interrupted"] == 1 { next }
    $col["new_tokens"] == "" || $col["prefilled_tokens"] == "" { bad = bad "\n  " where ": token counts missing"; next }
    { n[s]++; r = $col["prefilled_tokens"] / $col["new_tokens"]
      if (r > max) bad = bad sprintf("\n  %s: prefilled %d for %d new (%.3f > %s), reuse from %s", where,
                                     $col["prefilled_tokens"], $col["new_tokens"], r, max, $col["reuse_tier"]) }
    END {
      split(want, ws, " ")
      for (i in ws) if (n[ws[i]] == 0) bad = bad "\n  " mode " " ws[i] ": no follow-up turns"
      if (bad != "") { print bad; exit 1 }
    }' "$csv" || fail "$1: follow-ups above (results: $out/$1)"
}
check_follow_ups roundrobin "chat agent interleaved"
# Round-robin used every replica (r1=N r2=N r3=N, each N > 0).
grep -qE '^r1=[1-9][0-9]* r2=[1-9][0-9]* r3=[1-9][0-9]*$' "$out/roundrobin/replicas.txt" \
  || fail "roundrobin: not every replica served: $(cat "$out/roundrobin/replicas.txt")"
check_follow_ups fault "chat"
[[ -s $out/logs/fault-killed ]] || fail "fault: no replica was killed"
echo "cluster: ok (round-robin and a killed replica: every follow-up within prefilled ÷ new $max_ratio)"
