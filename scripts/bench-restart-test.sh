#!/usr/bin/env bash
# ctest's bench_restart: `hearth bench --diagnose --probe restart --restart-cmd CMD` against
# `hearth serve --cache-dir D` on a tiny model. CMD stops the server with SIGTERM and starts
# it again on the same port and directory: every conversation must be kept, from disk. Then
# a CMD that also wipes D: the probe must report the loss.
# Usage: bench-restart-test.sh HEARTH MODEL.gguf
set -euo pipefail
hearth=$1 model=$2
work=$(mktemp -d)
cleanup() {
  [[ -f "$work/pid" ]] && kill -9 "$(cat "$work/pid")" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "bench_restart: $*" >&2; echo "--- server log" >&2; tail -20 "$work/server.err" >&2; exit 1; }

# The restart command: what `systemctl restart` would do for a service. The server runs
# detached from this shell (its pid in $work/pid), as a service would, so the command can
# wait for it to exit.
cat >"$work/restart.sh" <<SCRIPT
set -eu
running() { st=\$(ps -o stat= -p "\$1" 2>/dev/null) || return 1; case "\$st" in Z*) return 1;; esac; }
if [ -f "$work/pid" ]; then
  sleep "\${PAUSE:-0}"
  pid=\$(cat "$work/pid")
  kill -TERM "\$pid"
  while running "\$pid"; do sleep 0.1; done
fi
if [ "\${WIPE:-0}" = 1 ]; then rm -rf "$work/states"; fi
: >"$work/server.out"
"$hearth" serve --port "\$PORT" -m "$model" -t 1 -c 4096 --cache-dir "$work/states" \
  >"$work/server.out" 2>>"$work/server.err" </dev/null &
echo \$! >"$work/pid"
for i in \$(seq 1200); do
  grep -q '^listening on' "$work/server.out" && exit 0
  running "\$(cat "$work/pid")" || exit 1
  sleep 0.1
done
exit 1
SCRIPT

# The first start takes any free port; restarts keep it.
PORT=0 bash "$work/restart.sh" || fail "hearth serve did not start"
port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/server.out")
[[ -n "$port" ]] || fail "no port in the server's output"

diagnose() {  # TAG RESTART_CMD
  "$hearth" bench --diagnose "http://127.0.0.1:$port" --probe restart --restart-cmd "$2" --sessions 3 \
    --max-tokens 8 --warmup 0 --render-model "$model" --out "$work/$1" --no-plots --quiet >"$work/$1.out" 2>&1 \
    || { cat "$work/$1.out" >&2; fail "hearth bench --diagnose failed ($1)"; }
}

# A pause first, as a restart after a moment of idle time: a SIGTERM the instant the last
# reply ends can stop that reply's warm-ahead before it stored the re-rendered reply
# (docs/benchmarks.md, --diagnose), and its conversation then re-prefills the reply's end.
diagnose kept "PAUSE=2 PORT=$port bash $work/restart.sh"
grep -q 'ok: restart kept 3 of 3 conversations (reuse from disk 3)' "$work/kept.out" \
  || { cat "$work/kept.out" >&2; fail "a graceful restart on the same --cache-dir did not keep every conversation"; }
awk '/^## Restart/{on=1; next} on && /^##/{exit} on && /^(\*\*|\|)/' "$work/kept.out"   # the verdict and the table, for the log

diagnose wiped "WIPE=1 PORT=$port bash $work/restart.sh"
grep -q 'reuse lost: restart kept 0 of 3 conversations (reuse from none 3)' "$work/wiped.out" \
  || { cat "$work/wiped.out" >&2; fail "a restart that wiped the cache was not reported as the loss"; }
awk '/^## Restart/{on=1; next} on && /^##/{exit} on && /^(\*\*|\|)/' "$work/wiped.out"
echo "bench_restart: ok"
