# shellcheck shell=bash
# Sourced by scripts/build-llama.sh and its test (tests/scripts/backend-test.sh): which
# llama.cpp backend suits this machine, where its build lives and how to configure it.
# Bash 3.2 and BSD tools (macOS) as well as GNU ones; uses only uname, nvcc and nvidia-smi
# from PATH, so a test can fake the machine with a PATH of stand-ins.

# find_nvcc: prints the path of CUDA's compiler: the nvcc on PATH, else the one of the
# toolkit in CUDA_PATH (default /usr/local/cuda), which installs often leave off PATH.
# Returns 1 when there is none.
find_nvcc() {
  local nvcc
  if nvcc=$(command -v nvcc 2>/dev/null); then
    echo "$nvcc"
  elif [[ -x ${CUDA_PATH:-/usr/local/cuda}/bin/nvcc ]]; then
    echo "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc"
  else
    return 1
  fi
}

# choose_backend: prints cpu, metal, cuda or vulkan. HEARTH_BACKEND when it is set (any
# other value returns 2, saying why); else Metal on Apple Silicon (Darwin arm64), CUDA
# where both nvcc and an NVIDIA GPU (one listed by `nvidia-smi -L`) are found, CPU
# otherwise. Vulkan is never chosen unasked: its loader and drivers cannot be told from
# here as cheaply as CUDA's.
choose_backend() {
  if [[ -n ${HEARTH_BACKEND:-} ]]; then
    case $HEARTH_BACKEND in
      cpu | metal | cuda | vulkan) echo "$HEARTH_BACKEND" ;;
      *)
        echo "build-llama: unknown HEARTH_BACKEND '$HEARTH_BACKEND' (cpu, metal, cuda, vulkan)" >&2
        return 2
        ;;
    esac
    return 0
  fi
  if [[ $(uname -s) == Darwin && $(uname -m) == arm64 ]]; then
    echo metal
  elif find_nvcc >/dev/null && [[ $(nvidia-smi -L 2>/dev/null) == GPU* ]]; then
    echo cuda
  else
    echo cpu
  fi
}

# llama_prefix CACHE VERSION BACKEND: the folder a build lives in, one per version, backend
# and RPC switch (HEARTH_RPC=1), so changing either builds anew instead of over another.
llama_prefix() {
  local prefix="$1/llama-$2-$3"
  [[ ${HEARTH_RPC:-0} == 1 ]] && prefix="$prefix-rpc"
  echo "$prefix"
}

# backend_cmake_flags BACKEND: sets the array backend_flags to llama.cpp's CMake flags for
# BACKEND and HEARTH_RPC. Always at least one flag: ggml turns Metal on by default on any
# Apple machine, so a CPU build says it is off.
backend_cmake_flags() {
  local nvcc
  case $1 in
    cpu) backend_flags=(-DGGML_METAL=OFF) ;;
    metal) backend_flags=(-DGGML_METAL=ON) ;;
    cuda)
      backend_flags=(-DGGML_CUDA=ON)
      # The toolkit's compiler, named, for when it is not on PATH (CMake looks only there).
      if nvcc=$(find_nvcc); then backend_flags+=("-DCMAKE_CUDA_COMPILER=$nvcc"); fi
      ;;
    vulkan) backend_flags=(-DGGML_VULKAN=ON) ;;
  esac
  # llama.cpp's RPC backend: `hearth serve --rpc host:port` spreads a model over the
  # machines running its ggml-rpc-server.
  if [[ ${HEARTH_RPC:-0} == 1 ]]; then backend_flags+=(-DGGML_RPC=ON); fi
}

# cpu_precision_flags FEATURES: sets the array precision_flags to the CMake flags that keep
# ggml's F16 dot products in F32 on a CPU with these feature flags (cpu_features in
# scripts/lib/host.sh). With -march=native on an x86 CPU with AVX512-FP16 (Sapphire Rapids
# and later), ggml_vec_dot_f16 adds up in half precision (ggml-cpu/simd-mappings.h, under
# __AVX512FP16__). That is the path of every one-row F16 matrix product, so of a sequence
# decoded alone, while two rows or more go through llamafile's sgemm, which adds up in F32:
# the same tokens then gave logits about 1e-3 of their scale apart depending on how they
# were batched, and a warm resume did not equal a cold one. An explicit -mno-avx512fp16
# wins over -march=native in GCC and Clang.
# shellcheck disable=SC2034  # precision_flags is read by the caller
cpu_precision_flags() {
  precision_flags=()
  case " $1 " in
    *" avx512_fp16 "*) precision_flags=(-DCMAKE_C_FLAGS=-mno-avx512fp16 -DCMAKE_CXX_FLAGS=-mno-avx512fp16) ;;
  esac
}
