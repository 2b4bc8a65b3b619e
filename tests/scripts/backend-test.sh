#!/usr/bin/env bash
# ctest's build_llama_backend: scripts/lib/backend.sh chooses llama.cpp's backend from
# what the machine has, faked here by a PATH of stand-ins for uname, nvcc and nvidia-smi;
# scripts/build-llama.sh --dry-run / --print-prefix show the choice without building.
# Usage: tests/scripts/backend-test.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../scripts/lib/backend.sh
source "$root/scripts/lib/backend.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

# machine NAME OS ARCH [nvcc] [gpu] [nogpu]: a folder of stand-ins: uname answering OS
# and ARCH, an nvcc, an nvidia-smi that lists a GPU or one that fails as without a driver.
machine() {
  local dir=$work/$1 os=$2 arch=$3 what
  shift 3
  mkdir -p "$dir"
  # shellcheck disable=SC2016  # $1 is the stand-in's own argument
  printf '#!/bin/sh\ncase "$1" in -s) echo %s ;; -m) echo %s ;; *) echo %s ;; esac\n' "$os" "$arch" "$os" >"$dir/uname"
  for what in "$@"; do
    case $what in
      nvcc) printf '#!/bin/sh\necho "Cuda compilation tools"\n' >"$dir/nvcc" ;;
      gpu) printf '#!/bin/sh\necho "GPU 0: NVIDIA H200 (UUID: GPU-0)"\n' >"$dir/nvidia-smi" ;;
      nogpu) printf '#!/bin/sh\necho "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."\nexit 9\n' >"$dir/nvidia-smi" ;;
    esac
  done
  chmod +x "$dir"/*
  echo "$dir"
}

# expect WHAT GOT WANT
expect() {
  if [[ $2 == "$3" ]]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "backend-test: FAILED: $1: got '$2', want '$3'" >&2
  fi
}

# chosen DIR [VAR=VALUE...]: choose_backend with only DIR on PATH (so a real nvcc or
# nvidia-smi on this machine cannot leak in) and no CUDA toolkit in its usual place.
chosen() {
  local dir=$1
  shift
  (
    export HEARTH_BACKEND='' CUDA_PATH=$work/no-cuda
    local kv
    for kv in "$@"; do export "${kv?}"; done
    PATH=$dir
    choose_backend 2>&1
  ) || echo "rc=$?"
}

expect "Linux, no CUDA" "$(chosen "$(machine linux Linux x86_64)")" cpu
expect "Apple Silicon" "$(chosen "$(machine mac Darwin arm64)")" metal
expect "Intel Mac" "$(chosen "$(machine intelmac Darwin x86_64)")" cpu
expect "nvcc and a GPU" "$(chosen "$(machine cuda Linux x86_64 nvcc gpu)")" cuda
expect "nvcc, no driver" "$(chosen "$(machine nodriver Linux x86_64 nvcc nogpu)")" cpu
expect "a GPU, no nvcc" "$(chosen "$(machine nonvcc Linux x86_64 gpu)")" cpu
expect "arm64 Linux is not a Mac" "$(chosen "$(machine armlinux Linux aarch64)")" cpu

# A toolkit off PATH, in CUDA_PATH: found, and named to CMake.
toolkit=$work/toolkit
mkdir -p "$toolkit/bin"
cp "$(machine tk Linux x86_64 nvcc)/nvcc" "$toolkit/bin/nvcc"
gpu_only=$(machine gpuonly Linux x86_64 gpu)
expect "nvcc in CUDA_PATH and a GPU" "$(chosen "$gpu_only" CUDA_PATH="$toolkit")" cuda
cuda_flags() {
  local CUDA_PATH=$toolkit PATH=$gpu_only
  backend_cmake_flags cuda
  echo "${backend_flags[*]}"
}
flags=$(cuda_flags)
expect "CUDA flags" "$flags" "-DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER=$toolkit/bin/nvcc"

# HEARTH_BACKEND wins over the machine; anything else is refused by name.
expect "HEARTH_BACKEND=vulkan on a Mac" "$(chosen "$work/mac" HEARTH_BACKEND=vulkan)" vulkan
expect "HEARTH_BACKEND=cpu with CUDA" "$(chosen "$work/cuda" HEARTH_BACKEND=cpu)" cpu
expect "HEARTH_BACKEND=rocm" "$(chosen "$work/linux" HEARTH_BACKEND=rocm)" \
  "build-llama: unknown HEARTH_BACKEND 'rocm' (cpu, metal, cuda, vulkan)
rc=2"

# Flags: a CPU build turns off Metal (ggml's default on any Apple machine); RPC is a switch.
expect "CPU flags" "$(backend_cmake_flags cpu; echo "${backend_flags[*]}")" "-DGGML_METAL=OFF"
expect "Metal flags with RPC" "$(HEARTH_RPC=1; backend_cmake_flags metal; echo "${backend_flags[*]}")" \
  "-DGGML_METAL=ON -DGGML_RPC=ON"

# Precision: on an x86 CPU with AVX512-FP16, ggml is built without it (its F16 dot product
# would add up in half precision); elsewhere nothing is added.
precision() { cpu_precision_flags "$1"; echo "${precision_flags[*]}"; }
expect "x86 with AVX512-FP16" "$(precision "fpu sse2 avx2 avx512f avx512_fp16")" \
  "-DCMAKE_C_FLAGS=-mno-avx512fp16 -DCMAKE_CXX_FLAGS=-mno-avx512fp16"
expect "x86 with AVX-512, no FP16" "$(precision "fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni")" ""
expect "Apple Silicon (no features)" "$(precision "")" ""

# Prefixes: one per backend and RPC switch; the CPU one keeps its name, so an existing
# build is reused.
expect "CPU prefix" "$(HEARTH_RPC=0 llama_prefix /c 3.21.1 cpu)" /c/llama-3.21.1-cpu
expect "CUDA prefix" "$(HEARTH_RPC=0 llama_prefix /c 3.21.1 cuda)" /c/llama-3.21.1-cuda
expect "RPC prefix" "$(HEARTH_RPC=1 llama_prefix /c 3.21.1 cpu)" /c/llama-3.21.1-cpu-rpc

# The script itself, on a faked Apple Silicon machine: says what it would build, builds nothing.
cache=$work/cache
dry=$(HEARTH_BACKEND='' HEARTH_RPC=1 HEARTH_CACHE=$cache PATH="$work/mac:$PATH" bash "$root/scripts/build-llama.sh" --dry-run)
expect "dry run" "$dry" "backend: metal
prefix: $cache/llama-3.21.1-metal-rpc
cmake flags: -DGGML_METAL=ON -DGGML_RPC=ON
targets: llama llama-common cpp-httplib llama-server llama-cli llama-completion llama-bench llama-batched-bench ggml-rpc-server"
expect "print prefix" "$(HEARTH_BACKEND=cpu HEARTH_RPC=0 HEARTH_CACHE=$cache bash "$root/scripts/build-llama.sh" --print-prefix)" \
  "$cache/llama-3.21.1-cpu"
expect "nothing built" "$(ls -A "$work/cache" 2>/dev/null)" ""

# scripts/configure.sh (what `make` runs): configures a build folder for the prefix of
# this backend, and again, saying so, once the backend changed; a stand-in cmake records.
fakecmake=$work/fakecmake
mkdir -p "$fakecmake"
printf '#!/bin/sh\necho "cmake $*" >>"%s"\n' "$work/cmake-calls" >"$fakecmake/cmake"
chmod +x "$fakecmake/cmake"
configure() {  # BACKEND BUILD_DIR [flags...]: what cmake was called with ("" if not), and the messages
  local backend=$1
  shift
  rm -f "$work/cmake-calls"
  HEARTH_BACKEND=$backend HEARTH_RPC=0 HEARTH_CACHE=$cache PATH="$fakecmake:$PATH" \
    bash "$root/scripts/configure.sh" "$@" 2>"$work/configure.err"
  cat "$work/cmake-calls" 2>/dev/null || true
}
b=$work/build
expect "first configure" "$(configure cpu "$b" -DHEARTH_SANITIZE=address)" \
  "cmake -S $root -B $b -DHEARTH_LLAMA_PREFIX=$cache/llama-3.21.1-cpu -DHEARTH_SANITIZE=address"
mkdir -p "$b"
printf 'HEARTH_LLAMA_DIR:PATH=\nHEARTH_LLAMA_PREFIX:PATH=%s\n' "$cache/llama-3.21.1-cpu" >"$b/CMakeCache.txt"
expect "same backend: left alone" "$(configure cpu "$b")" ""
expect "another backend: configured again" "$(configure cuda "$b")" \
  "cmake -S $root -B $b -DHEARTH_LLAMA_PREFIX=$cache/llama-3.21.1-cuda"
expect "another backend: said so" "$(head -1 "$work/configure.err")" \
  "configure: $b was configured for $cache/llama-3.21.1-cpu; configuring it for $cache/llama-3.21.1-cuda"
printf 'HEARTH_LLAMA_DIR:PATH=/src/llama.cpp\nHEARTH_LLAMA_PREFIX:PATH=\n' >"$b/CMakeCache.txt"
expect "a llama.cpp tree of one's own: left alone" "$(configure cuda "$b")" ""

echo "backend-test: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
