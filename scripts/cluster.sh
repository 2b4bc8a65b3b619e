#!/usr/bin/env bash
# `make cluster-demo`: three `hearth serve` replicas sharing one cache through Redis, behind
# HAProxy (deploy/haproxy/hearth.cfg), all on loopback ports. Runs `hearth bench` through
# HAProxy once per routing mode, prints each scenario's follow-up prefilled ÷ new, where
# the reused prefixes came from and how requests spread over the replicas, then stops
# everything (docs/scale-out.md).
#
# Usage: scripts/cluster.sh HEARTH MODELS_DIR RESULTS_DIR
# Env:   CLUSTER_MODEL      model file (default: MODELS_DIR/small-qwen35.gguf, made once)
#        CLUSTER_MODES      routing runs, in order (default "roundrobin affinity");
#                           "fault": affinity, and the replica holding the conversation is
#                           killed (kill -9) after its second turn
#        CLUSTER_SCENARIOS  bench scenarios (default chat,agent,interleaved)
#        CLUSTER_TURNS      turns per session (default 4)
#        CLUSTER_THINK_MS   pause before each follow-up (default 1500; see below)
#        CLUSTER_REDIS      1 (default): replicas get --cache-redis; 0: each keeps its own
#                           cache, for comparison
#        CLUSTER_SERVE_FLAGS  more `hearth serve` flags for every replica
# Results: RESULTS_DIR/MODE/ (the bench's turns.csv, rows.jsonl, summary.md, and
# replicas.txt: HAProxy's request count per replica after the run), logs of every process
# in RESULTS_DIR/logs/.
#
# The think time: a replica gives its states to Redis behind, once it has been idle for
# 100 ms, and the write then takes its time on the wire (a state of megabytes to GBs). A
# follow-up sent the instant a reply ends, to another replica, can get there first and
# recompute what Redis was about to hold. People reading a reply
# and agents running a tool take longer than that; the bench's --think-ms stands for them.
set -euo pipefail
who=cluster
hearth=${1:?usage: cluster.sh HEARTH MODELS_DIR RESULTS_DIR} models=${2:?} results=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/hearth-serve.sh
source "$here/lib/hearth-serve.sh"
# shellcheck source=lib/servers.sh
source "$here/lib/servers.sh"
cfg=$here/../deploy/haproxy/hearth.cfg
modes=${CLUSTER_MODES:-roundrobin affinity}
scenarios=${CLUSTER_SCENARIOS:-chat,agent,interleaved}
turns=${CLUSTER_TURNS:-4}
think_ms=${CLUSTER_THINK_MS:-1500}
use_redis=${CLUSTER_REDIS:-1}

for tool in redis-server redis-cli haproxy curl jq; do
  command -v "$tool" >/dev/null || { echo "$who: $tool is needed (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
[[ -x $hearth ]] || { echo "$who: $hearth is not built" >&2; exit 1; }
model=${CLUSTER_MODEL:-$models/small-qwen35.gguf}
if [[ ! -f $model ]]; then
  mkdir -p "$(dirname "$model")"
  "$hearth" mkmodel --arch qwen35 --preset small --out "$model"
fi

mkdir -p "$results/logs"
logs=$(cd "$results/logs" && pwd)
work=$(mktemp -d)
# shellcheck disable=SC2317  # run by the EXIT trap
stop_all() {
  stop_servers
  rm -rf "$work"
}
trap stop_all EXIT

# Redis: loopback only, no persistence (it is a cache: a restart empties it, and replicas
# recompute), a memory cap and least-recently-used eviction over all keys.
redis_port=$(free_port 16390)
redis-server --bind 127.0.0.1 --port "$redis_port" --save '' --appendonly no \
  --maxmemory 512mb --maxmemory-policy allkeys-lru --dir "$work" --logfile "$logs/redis.log" &
pids+=("$!")
for _ in $(seq 100); do
  [[ $(redis-cli -p "$redis_port" ping 2>/dev/null) == PONG ]] && break
  sleep 0.1
done
[[ $(redis-cli -p "$redis_port" ping 2>/dev/null) == PONG ]] || { tail -5 "$logs/redis.log" >&2; echo "$who: redis-server did not start" >&2; exit 1; }
echo "$who: redis-server on 127.0.0.1:$redis_port (maxmemory 512mb, allkeys-lru, no persistence)"

redis_flags=()
[[ $use_redis == 1 ]] && redis_flags=(--cache-redis "redis://127.0.0.1:$redis_port")
serve_flags=()
read -r -a serve_flags <<<"${CLUSTER_SERVE_FLAGS:-}"
replica_ports=()
replica_pids=()
for i in 1 2 3; do
  mkdir -p "$work/cache-$i"
  # -c: the demo's prompts are short; the model's own 262k-cell context, three times over,
  # would take gigabytes of KV for nothing.
  start_hearth "$logs/replica-$i.out" "$logs/replica-$i.log" -m "$model" -t 1 -c 16384 --cache-dir "$work/cache-$i" \
    ${redis_flags[@]+"${redis_flags[@]}"} ${serve_flags[@]+"${serve_flags[@]}"} \
    || { echo "$who: replica $i did not start (log: $logs/replica-$i.log)" >&2; exit 1; }
  pids+=("$server_pid")
  replica_pids+=("$server_pid")
  replica_ports+=("$port")
done
echo "$who: replicas r1 r2 r3 on 127.0.0.1:${replica_ports[0]} :${replica_ports[1]} :${replica_ports[2]}" \
  "($([[ $use_redis == 1 ]] && echo "sharing Redis" || echo "each with its own cache only"))"

lb_port=$(free_port 18400)
rr_port=$(free_port 18500)
stats_port=$(free_port 18600)
HEARTH_LB_BIND=127.0.0.1:$lb_port HEARTH_LB_RR_BIND=127.0.0.1:$rr_port HEARTH_LB_STATS_BIND=127.0.0.1:$stats_port \
  HEARTH_REPLICA_1=127.0.0.1:${replica_ports[0]} HEARTH_REPLICA_2=127.0.0.1:${replica_ports[1]} \
  HEARTH_REPLICA_3=127.0.0.1:${replica_ports[2]} haproxy -db -f "$cfg" >"$logs/haproxy.log" 2>&1 &
pids+=("$!")
haproxy_pid=$!
wait_healthy "http://127.0.0.1:$lb_port" "$haproxy_pid" "$logs/haproxy.log"
# Every replica's health check passed, so the first turns are not all sent to one.
for _ in $(seq 100); do
  [[ $(curl -s "http://127.0.0.1:$stats_port/stats;csv" | awk -F, '$1 == "hearth_affinity" && $18 == "UP"' | wc -l) -eq 3 ]] && break
  sleep 0.1
done
echo "$who: haproxy on 127.0.0.1:$lb_port (affinity) and :$rr_port (round-robin); stats: http://127.0.0.1:$stats_port/stats"

# stot (requests) of each replica in BACKEND, as "r1=N r2=N r3=N".
replica_counts() {
  curl -s "http://127.0.0.1:$stats_port/stats;csv" |
    awk -F, -v b="$1" '$1 == b && $2 ~ /^r[0-9]+$/ { printf "%s%s=%s", sep, $2, $8; sep = " " } END { print "" }'
}
redis_lookups() {
  redis-cli -p "$redis_port" info stats | tr -d '\r' |
    awk -F: '$1 == "keyspace_hits" { h = $2 } $1 == "keyspace_misses" { m = $2 } END { print h + m }'
}

# fault: waits until one replica has answered two of the bench's turns (requests longer
# than its warm-up), that is the replica holding the conversation, gives it a moment more
# to write its states behind (it does when idle), and kills it while the bench thinks.
kill_home_after() {
  local want=$1 i home=0 base=()
  # long_turns I: the turns replica I has answered so far.
  long_turns() {
    curl -s "http://127.0.0.1:${replica_ports[$1 - 1]}/v1/cache" 2>/dev/null |
      jq '[.requests[]? | select(.outcome == "done" and .prompt_tokens > 100)] | length' 2>/dev/null || echo 0
  }
  for i in 1 2 3; do base+=("$(long_turns "$i")"); done
  for _ in $(seq 1200); do
    for i in 1 2 3; do
      [[ $(($(long_turns "$i") - base[i - 1])) -ge $want ]] && home=$i
    done
    [[ $home -gt 0 ]] && break
    sleep 0.2
  done
  [[ $home -gt 0 ]] || { echo "$who: fault: no replica answered $want turns" >&2; return 1; }
  sleep 1.5
  kill -9 "${replica_pids[home - 1]}"
  echo "$who: fault: killed replica r$home (pid ${replica_pids[home - 1]}), which held the conversation, after its turn $want"
  echo "r$home" >"$logs/fault-killed"
}

summarize() {  # MODE RESULTS: one line per scenario, from the bench's turns.csv
  awk -F, -v mode="$1" '
    NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["turn"] > 0 && $col["ok"] == 1 && $col["interrupted"] == 0 && $col["new_tokens"] > 0 {
      s = $col["scenario"]; if (!(s in n)) order[++k] = s
      n[s]++; p[s] += $col["prefilled_tokens"]; w[s] += $col["new_tokens"]
      r = $col["prefilled_tokens"] / $col["new_tokens"]; if (r > worst[s]) worst[s] = r
      t = $col["reuse_tier"]; if (t == "") t = "none"; tiers[s] = tiers[s] " " t
    }
    $col["ok"] != 1 { failed[$col["scenario"]]++ }
    END {
      for (j = 1; j <= k; j++) {
        s = order[j]; split(substr(tiers[s], 2), ts, " "); delete c; line = ""
        for (x in ts) c[ts[x]]++
        for (t in c) line = line sprintf(" %s %d", t, c[t])
        printf "%s: %-11s %2d follow-ups  prefilled/new %.3f overall, worst %.3f  (reuse from:%s)%s\n",
          mode, s, n[s], p[s] / w[s], worst[s], line, (failed[s] ? sprintf("  %d FAILED", failed[s]) : "")
      }
    }' "$2/turns.csv"
}

for mode in $modes; do
  mode_think=$think_ms
  case $mode in
    roundrobin) url=http://127.0.0.1:$rr_port backend=hearth_roundrobin bench_scenarios=$scenarios ;;
    affinity) url=http://127.0.0.1:$lb_port backend=hearth_affinity bench_scenarios=$scenarios ;;
    # Time for the kill between two turns (kill_home_after).
    fault) url=http://127.0.0.1:$lb_port backend=hearth_affinity bench_scenarios=chat mode_think=3000 ;;
    *) echo "$who: unknown mode $mode (roundrobin, affinity, fault)" >&2; exit 1 ;;
  esac
  think_flags=()
  [[ $mode_think -gt 0 ]] && think_flags=(--think-ms "$mode_think")
  out=$results/$mode
  rm -rf "$out"
  before=$(replica_counts "$backend")
  lookups_before=$(redis_lookups)
  killer=
  if [[ $mode == fault ]]; then
    rm -f "$logs/fault-killed"
    kill_home_after 2 &
    killer=$!
    pids+=("$killer")
  fi
  echo "$who: $mode: hearth bench --scenario $bench_scenarios --turns $turns ${think_flags[*]:-} through $url"
  "$hearth" bench "$url" --label "$mode" --scenario "$bench_scenarios" --turns "$turns" --session-key \
    --system-tokens 150 --user-tokens 60 --max-tokens 12 ${think_flags[@]+"${think_flags[@]}"} \
    --render-model "$model" --out "$out" --quiet --no-plots --no-turn-table >"$logs/bench-$mode.log" 2>&1 \
    || { tail -20 "$logs/bench-$mode.log" >&2; echo "$who: hearth bench failed ($mode)" >&2; exit 1; }
  [[ -n $killer ]] && wait "$killer"
  summarize "$mode" "$out"
  after=$(replica_counts "$backend")
  echo "$after" >"$out/replicas.txt"  # for tests/cluster/run.sh
  echo "$mode: requests per replica: $after (before: $before); Redis lookups: $(($(redis_lookups) - lookups_before))"
done
echo "$who: results in $results (turns.csv per mode), logs in $logs; stopping"
