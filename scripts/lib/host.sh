# shellcheck shell=bash
# Sourced by the scripts that ask the host about files, processes, time and cores: the
# same answers from GNU tools and /proc (Linux) as from BSD tools (macOS), in bash 3.2.
# The rest of scripts/ uses these rather than `stat -c`, `date +%N`, /proc or nproc
# (tests/scripts/lint.sh checks that).

# file_size FILE: its size in bytes.
file_size() {
  local n
  n=$(wc -c <"$1") || return 1
  echo $((n))  # BSD wc pads with spaces
}

# now_seconds: the time since the epoch, in seconds with a fractional part where the host
# has one (GNU date's %N; elsewhere perl's, which macOS ships; else whole seconds).
now_seconds() {
  local t
  t=$(date +%s.%N)
  case $t in
    *[!0-9.]*) perl -MTime::HiRes=time -e 'printf "%.3f\n", time' 2>/dev/null || date +%s ;;
    *) echo "$t" ;;
  esac
}

# rss_kib PID: the resident memory of process PID in KiB (nothing once it has exited).
rss_kib() {
  ps -o rss= -p "$1" 2>/dev/null | tr -d ' '
}

# cpu_count: the logical cores this process may use.
cpu_count() {
  nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2
}

# cpu_features: the CPU's feature flags, lowercase, separated by spaces: the first "flags"
# line of /proc/cpuinfo on Linux ("avx2 avx512f avx512_fp16 ..."), sysctl's machdep.cpu
# features on an Intel Mac, nothing on Apple Silicon.
cpu_features() {
  if [[ $(uname -s) == Linux ]]; then
    sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1
  else
    sysctl -n machdep.cpu.features machdep.cpu.leaf7_features 2>/dev/null | tr 'A-Z\n' 'a-z '
  fi
}
