#!/usr/bin/env bash
# Makes the tiny random-weight models the tests use. Usage: make-test-models.sh HEARTH OUTDIR
set -euo pipefail
hearth=$1 out=$2
mkdir -p "$out"
for arch in qwen35 qwen35moe qwen3 qwen3next gemma4 granitehybrid gpt-oss; do
  "$hearth" mkmodel --arch "$arch" --preset tiny --seed 7 --out "$out/tiny-$arch.gguf"
done
