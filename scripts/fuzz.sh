#!/usr/bin/env bash
# Runs one libFuzzer target of tests/fuzz/ from its seed corpus on.
# Usage: fuzz.sh BUILD TARGET   (BUILD: a build folder configured with HEARTH_FUZZ=ON)
#   FUZZ_SECONDS=N  fuzz for N seconds (default 60); what it finds grows the working corpus
#                   BUILD/fuzz-corpus/TARGET, kept between runs
#   FUZZ_RUNS=N     instead: the seeds, then N inputs from a fresh corpus, fixed seed (the
#                   ctest smoke: the same inputs every time)
# A crash leaves its input in BUILD/fuzz-artifacts/TARGET/ and exits non-zero. Keep it as a
# regression seed in tests/fuzz/corpus/TARGET/ once it is fixed.
set -euo pipefail
build=$1 target=$2
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$build/tests/fuzz/fuzz_$target"
seeds="$root/tests/fuzz/corpus/$target"
[[ -x $bin ]] || { echo "fuzz: $bin not built (cmake --build $build --target hearth_fuzz)" >&2; exit 1; }
[[ -d $seeds ]] || { echo "fuzz: no seed corpus $seeds" >&2; exit 1; }

# Inputs past these sizes only slow a target down: rendering and parsing cost grows with
# the text, and the interesting structure fits well inside.
case $target in
  openai_request|anthropic_request|json_fields) max_len=65536 ;;
  request_builder) max_len=8192 ;;
  output_parser) max_len=2048 ;;
  detokenizer|stabilizer) max_len=4096 ;;
  *) max_len=4096 ;;
esac
flags=("-max_len=$max_len" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1)
case $target in
  openai_request|anthropic_request|json_fields|request_builder) flags+=(-dict="$root/tests/fuzz/json.dict") ;;
esac

artifacts="$build/fuzz-artifacts/$target"
mkdir -p "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [[ -n ${FUZZ_RUNS:-} ]]; then
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
  flags+=(-runs="$FUZZ_RUNS" -seed=1)
else
  corpus="$build/fuzz-corpus/$target"
  mkdir -p "$corpus"
  flags+=(-max_total_time="${FUZZ_SECONDS:-60}")
fi
exec "$bin" "${flags[@]}" -artifact_prefix="$artifacts/" "$corpus" "$seeds"
