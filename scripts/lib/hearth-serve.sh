# shellcheck shell=bash
# Sourced by the scripts that run `hearth serve` for a while (demo, bench smoke test,
# memory bench). Needs $hearth.
#
# start_hearth OUT ERR [serve flags...]: starts `hearth serve --port 0 FLAGS` in the
# background with stdout in OUT and stderr in ERR, then sets server_pid and port once it
# says where it listens. Returns 1, with the end of ERR on stderr, when the server exits
# or has not started within two minutes.
# shellcheck disable=SC2154  # $hearth is the sourcing script's
start_hearth() {
  local out=$1 err=$2
  shift 2
  # Emptied here, not only by the redirection below: that happens in the child, after this
  # shell may already have read a previous server's port from the same file.
  : >"$out"
  "$hearth" serve --port 0 "$@" >"$out" 2>"$err" &
  server_pid=$!
  port=
  for _ in $(seq 1200); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$out")
    [[ -n "$port" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$err" >&2
  return 1
}
