# shellcheck shell=bash
# Sourced by the scripts that start servers side by side (bench-compare, bench-pressure,
# bench-shadow, demo, cluster). Needs $who: the script's name, for messages.
#
# pids: what the script started in the background; it appends each one (pids+=("$!")).
# stop_servers: kills everything in pids, waits for it and empties the list; each script
# sets `trap stop_servers EXIT` (or a trap that calls it) and may call it between runs.
# free_port START: the first port from START on (200 tried) that nothing listens on.
# wait_healthy URL PID LOG: waits until URL/health answers; exits the script, with the end
# of LOG, when PID exits or five minutes pass.
pids=()
stop_servers() {
  local p
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
  pids=()
}
# shellcheck disable=SC2154  # $who is the sourcing script's
free_port() {
  local p
  for p in $(seq "$1" $(($1 + 200))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  echo "$who: no free port near $1" >&2
  exit 1
}
wait_healthy() {
  for _ in $(seq 600); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || { tail -20 "$3" >&2; echo "$who: server at $1 exited" >&2; exit 1; }
    sleep 0.5
  done
  echo "$who: $1 did not become healthy" >&2
  exit 1
}
