#!/bin/bash
# Memory and restore-speed measurement on the small model: interleaved conversations,
# room for 2 on the device, bounded RAM and disk tiers, then a restart.
set -u
# Usage: HEARTH=build/src/hearth MODEL=small-qwen35.gguf OUT=dir scripts/bench-memory.sh
# Samples the server's resident memory and the cache directory's size every 0.5 s
# (OUT/rss-N.txt: time, VmRSS KiB, cache dir KiB); restore speeds are in the server's
# per-request log lines (OUT/serve-N.log: tier, ms, MiB).
H=${HEARTH:-build/src/hearth}
M=${MODEL:?set MODEL to a model file (hearth mkmodel --preset small)}
OUT=${OUT:-bench-results/memory}
mkdir -p "$OUT"
D=$OUT/cdir; rm -rf "$D"
PORT=${PORT:-18410}
start() {
  $H serve -m $M -t 2 -c 8192 -P 2 --cache-seqs 2 --cache-ram 256 --cache-dir $D --cache-disk 512 --port $PORT -v > $OUT/serve-$1.log 2>&1 &
  echo $! > $OUT/pid
  for i in $(seq 1 120); do curl -sf 127.0.0.1:$PORT/health >/dev/null && break; sleep 0.5; done
  ( while kill -0 $(cat $OUT/pid) 2>/dev/null; do echo "$(date +%s.%N) $(awk '/VmRSS/{print $2}' /proc/$(cat $OUT/pid)/status) $(du -sk $D | cut -f1)"; sleep 0.5; done ) > $OUT/rss-$1.txt &
}
stop() { kill $(cat $OUT/pid); sleep 2; }
start 1
$H bench http://127.0.0.1:$PORT --scenario interleaved --sessions 6 --turns 3 --max-tokens 8 --no-nonce --render-model $M --out $OUT/b1 --no-plots > $OUT/b1.log 2>&1
stop
start 2
$H bench http://127.0.0.1:$PORT --scenario interleaved --sessions 6 --turns 3 --max-tokens 8 --no-nonce --render-model $M --out $OUT/b2 --no-plots > $OUT/b2.log 2>&1
stop
echo done
