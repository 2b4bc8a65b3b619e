#!/usr/bin/env bash
# Memory and restore-speed measurement (docs/benchmarks.md): interleaved conversations
# with room for 2 on the device and bounded RAM and disk tiers, then a restart over the
# same cache directory and the same sessions again.
# Usage: HEARTH=build/src/hearth MODEL=small-qwen35.gguf OUT=dir scripts/bench-memory.sh
# Samples the server's resident memory and the cache directory's size every 0.5 s
# (OUT/rss-N.txt: time, resident KiB, cache dir KiB); restore speeds are in the server's
# per-request log lines (OUT/serve-N.log: tier, ms, MiB).
set -euo pipefail
# shellcheck source=lib/hearth-serve.sh
source "$(dirname "$0")/lib/hearth-serve.sh"
# shellcheck source=lib/host.sh
source "$(dirname "$0")/lib/host.sh"
hearth=${HEARTH:-build/src/hearth}
model=${MODEL:?set MODEL to a model file (hearth mkmodel --preset small)}
out=${OUT:-bench-results/memory}
cache_dir=$out/cdir
mkdir -p "$out"
rm -rf "$cache_dir"
server_pid=
trap '[[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null' EXIT

for run in 1 2; do
  start_hearth "$out/serve-$run.out" "$out/serve-$run.log" -m "$model" -t 2 -c 8192 -P 2 --cache-seqs 2 \
    --cache-ram 256 --cache-dir "$cache_dir" --cache-disk 512 -v
  ( while kill -0 "$server_pid" 2>/dev/null; do
      echo "$(now_seconds) $(rss_kib "$server_pid") $(du -sk "$cache_dir" | cut -f1)"
      sleep 0.5
    done ) >"$out/rss-$run.txt" &
  "$hearth" bench "http://127.0.0.1:$port" --scenario interleaved --sessions 6 --turns 3 --max-tokens 8 \
    --no-nonce --render-model "$model" --out "$out/b$run" --no-plots >"$out/b$run.log" 2>&1
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=
done
echo "bench-memory: results in $out"
