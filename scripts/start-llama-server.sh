#!/usr/bin/env bash
# Starts llama.cpp's llama-server, built by scripts/build-llama.sh from the same source
# hearth builds on, with its caching flags for hybrid models spelled out, for comparisons
# with `hearth bench --compare`. Runs in the foreground; stop it with Ctrl-C or kill.
#
# Usage: scripts/start-llama-server.sh MODEL.gguf PORT [extra llama-server flags...]
# Env:   CTX (default 16384)   total KV cells, shared by the slots (--kv-unified)
#        SLOTS (default 2)     parallel slots (-np)
#        CACHE_RAM (8192)      host prompt cache in MiB (--cache-ram)
#        THREADS (default: all cores)
#        LLAMA_SERVER          path of the binary (default: the scripts/build-llama.sh one)
#
# The flags, all llama-server's own defaults for this version made explicit except
# --metrics, so the comparison is against what a user gets by following its README:
#   --jinja                    the model's Jinja chat template (Qwen3.5's real one)
#   --ctx-checkpoints 32       copies of the recurrent state per slot, the only way a
#                              hybrid (Gated DeltaNet) model can resume a shorter prefix
#   --checkpoint-min-step 8192 spacing between those checkpoints
#   --cache-ram N              host RAM prompt cache, so idle slots' states survive
#   --cache-idle-slots         save idle slots to that cache when a new task needs the slot
#   --kv-unified -np SLOTS     one KV pool shared by the slots
#   --cache-reuse is left off: KV shifting cannot work on Qwen3.5's rope.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,9p' "$0" >&2; exit 2; }
model=$1 port=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bin=${LLAMA_SERVER:-}
if [[ -z "$bin" ]]; then
  prefix=$(bash "$here/build-llama.sh")
  bin="$prefix/build/bin/llama-server"
fi
[[ -x "$bin" ]] || { echo "start-llama-server: $bin is not built (scripts/build-llama.sh)" >&2; exit 1; }
[[ -f "$model" ]] || { echo "start-llama-server: no model file $model" >&2; exit 1; }
threads=()
[[ -n "${THREADS:-}" ]] && threads=(-t "$THREADS")
cmd=("$bin" -m "$model" --host 127.0.0.1 --port "$port"
     -c "${CTX:-16384}" -np "${SLOTS:-2}" --kv-unified
     --jinja --ctx-checkpoints 32 --checkpoint-min-step 8192
     --cache-ram "${CACHE_RAM:-8192}" --cache-idle-slots
     --metrics ${threads[@]+"${threads[@]}"} "$@")
echo "start-llama-server: ${cmd[*]}" >&2  # scripts/bench-compare.sh records this line
exec "${cmd[@]}"
