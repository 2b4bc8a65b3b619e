# shellcheck shell=bash
# Sourced by scripts/install-deps.sh and tests/e2e/run.sh: the Node.js the end-to-end
# tests run on. The pinned SDKs and Claude Code need Node.js 22 or later, and Debian 12
# ships 18; so when the node on PATH is older, install-deps.sh installs the npm package
# `node` (the official binaries), pinned, into the build cache, and run.sh puts it first
# on PATH. Nothing is fetched when the tests run.
#
# Env: HEARTH_CACHE=dir (default ~/.cache/hearth), as scripts/build-llama.sh.

node_min_major=22
node_pinned_version=22.23.3  # the npm package `node`; has linux-x64, linux-arm64, darwin-x64 builds
node_pinned_prefix=${HEARTH_CACHE:-$HOME/.cache/hearth}/node-$node_pinned_version

# node_major NODE: prints the major version of the executable NODE (nothing if it does not run).
node_major() {
  "$1" --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\)\..*/\1/p'
}

# find_node_dir: prints the folder of a node of version node_min_major or later: the
# pinned one when it is installed, else the one on PATH, else Homebrew's (which an older
# node earlier on PATH may hide). Returns 1 when there is none.
find_node_dir() {
  local candidate major
  for candidate in "$node_pinned_prefix/node_modules/node/bin/node" "$(command -v node 2>/dev/null || true)" \
                   "${HOMEBREW_PREFIX:-/opt/homebrew}/opt/node/bin/node" /usr/local/opt/node/bin/node; do
    [[ -n $candidate && -x $candidate ]] || continue
    major=$(node_major "$candidate")
    if [[ -n $major && $major -ge $node_min_major ]]; then
      dirname "$candidate"
      return 0
    fi
  done
  return 1
}

# describe_path_node: what node is on PATH, for messages.
describe_path_node() {
  if command -v node >/dev/null 2>&1; then
    echo "$(command -v node) is $(node --version 2>/dev/null || echo 'not runnable')"
  else
    echo "no node on PATH"
  fi
}

# install_pinned_node: installs the npm package node@node_pinned_version into
# node_pinned_prefix with the npm on PATH (whatever node that npm runs on). Returns 1,
# having said why, when it cannot.
install_pinned_node() {
  command -v npm >/dev/null 2>&1 || { echo "node: npm is needed to install Node.js $node_pinned_version" >&2; return 1; }
  mkdir -p "$(dirname "$node_pinned_prefix")"
  local tmp
  tmp=$(mktemp -d "$node_pinned_prefix.tmp.XXXXXX")
  echo "node: installing Node.js $node_pinned_version (npm package node) into $node_pinned_prefix" >&2
  # The package's install script fetches the platform's binary package: scripts stay on.
  if ! (cd "$tmp" && npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "node@$node_pinned_version" >&2); then
    rm -rf "$tmp"
    echo "node: npm install node@$node_pinned_version failed" >&2
    return 1
  fi
  local major
  major=$(node_major "$tmp/node_modules/node/bin/node")
  if [[ $major != "${node_pinned_version%%.*}" ]]; then
    rm -rf "$tmp"
    echo "node: the installed node@$node_pinned_version does not run here" >&2
    return 1
  fi
  rm -rf "$node_pinned_prefix"
  mv "$tmp" "$node_pinned_prefix"
}
