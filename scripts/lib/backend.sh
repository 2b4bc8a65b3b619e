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
