#!/usr/bin/env bash
# ctest's scripts_lint: every bash script of the repository (scripts/, tests/, .ci/run)
#  1. passes shellcheck (as bash, following what it sources; .shellcheckrc),
#  2. uses nothing newer than bash 3.2, the bash of macOS: no associative arrays, case
#     conversion, mapfile, namerefs, negative subscripts, &>>, |&, coproc, wait -n, ...,
#     and no expansion of an array that may be empty without ${a[@]+"${a[@]}"} (under
#     set -u, bash before 4.4 calls an empty array unbound),
#  3. uses no GNU-only tool or option (stat -c, date +%N, /proc, nproc, timeout, sed -i,
#     readlink -f, dd's byte options, ...) outside scripts/lib/host.sh, which has the
#     fallbacks for BSD tools,
#  4. is executable when it starts with #! (the docs run scripts/bench-speed.sh and the
#     rest as commands); what scripts/lib/ holds is sourced, not run.
# Usage: tests/scripts/lint.sh SHELLCHECK
set -euo pipefail
shellcheck=${1:?usage: lint.sh SHELLCHECK}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
files=()
while IFS= read -r f; do files+=("$f"); done < <(find scripts tests -name '*.sh' -not -path '*/node_modules/*' | sort)
files+=(.ci/run)
problems=0
report() {  # FILE:LINE: TEXT
  echo "lint: $*" >&2
  problems=$((problems + 1))
}

# 1. shellcheck, every severity.
if ! "$shellcheck" --shell=bash --external-sources --format=gcc "${files[@]}" >"${TMPDIR:-/tmp}/lint-$$.txt"; then
  while IFS= read -r line; do report "$line"; done <"${TMPDIR:-/tmp}/lint-$$.txt"
fi
rm -f "${TMPDIR:-/tmp}/lint-$$.txt"

# grep_code FILE ERE: the lines of FILE (as FILE:N: text) that match ERE, comment lines aside.
grep_code() {
  grep -nE "$2" "$1" | grep -vE '^[0-9]+:[[:space:]]*#' | sed "s|^|$1:|" || true
}

# 2. Bash 4 and later.
bash4=(
  'declare -[a-zA-Z]*A|local -[a-zA-Z]*A|typeset -[a-zA-Z]*A|readonly -[a-zA-Z]*A'  # associative arrays (4.0)
  '(declare|local|typeset) -[a-zA-Z]*n[a-zA-Z]* '  # namerefs (4.3)
  'declare -[a-zA-Z]*g'                          # global declarations (4.2)
  '\$\{[#!]?[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?(,|\^)'  # case conversion (4.0)
  '\$\{[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?@[QEPAaKkUuL]\}'  # transformations (4.4)
  '(^|[^A-Za-z0-9_-])(mapfile|readarray|coproc)([^A-Za-z0-9_-]|$)'  # 4.0
  '&>>|\|&'                                      # 4.0
  '\[-[0-9]+\]\}'                                # negative subscripts (4.3)
  '\$\{[A-Za-z_][A-Za-z0-9_]*:[^}:]*:[[:space:]]*-[0-9]'  # negative substring length (4.2)
  'wait -[a-z]*[nfp]'                            # wait -n (4.3), -f, -p
  'shopt -s (globstar|lastpipe|autocd|direxpand|checkjobs|globasciiranges|localvar_inherit)'
  'EPOCHREALTIME|EPOCHSECONDS|BASHPID|BASH_ARGV0'
  '\[\[ -v |test -v |\[ -v '                     # 4.2
  ';;&|;&[[:space:]]*$'                          # case fall-through (4.0)
  '\{[0-9]+\.\.[0-9]+\.\.[0-9]+\}|\{0[0-9]+\.\.' # brace steps and padding (4.0)
  '(^|[[:space:]])\{[A-Za-z_][A-Za-z0-9_]*\}[<>]'  # exec {fd}> (4.1)
  "printf[^|]*%\\([^)]*\\)T"                     # printf's time format (4.2)
)
for f in "${files[@]}"; do
  [[ $f == tests/scripts/lint.sh ]] && continue  # its patterns name what they look for
  for re in "${bash4[@]}"; do
    while IFS= read -r hit; do [[ -n $hit ]] && report "$hit: needs bash 4 or later (macOS has 3.2)"; done \
      < <(grep_code "$f" "$re")
  done
  # Arrays that may be empty: made empty (NAME=()) or read into (read -a NAME).
  names=$( { grep -oE '(^|[[:space:];(])[A-Za-z_][A-Za-z0-9_]*=\(\)' "$f" | grep -oE '[A-Za-z_][A-Za-z0-9_]*' || true
             grep -oE 'read [^<|;]*-a[[:space:]]+[A-Za-z_][A-Za-z0-9_]*' "$f" | awk '{print $NF}' || true; } | sort -u)
  for n in $names; do
    while IFS= read -r hit; do
      [[ -n $hit ]] && report "$f:$hit: \${${n}[@]} may be empty: write \${${n}[@]+\"\${${n}[@]}\"} (or \${${n}[*]:-}), which bash 3.2 accepts under set -u"
    done < <(sed -e "s/\${$n\[@\]+\"\${$n\[@\]}\"}//g" "$f" | grep -nE "\\\$\\{$n\\[[@*]\\]\\}" | grep -vE '^[0-9]+:[[:space:]]*#' || true)
  done
done

# 3. GNU-only tools and options, outside the one place that falls back from them.
gnu=(
  'stat -c|stat --'
  'date [^|;]*%N|date -d|date --'
  '/proc/'
  '(^|[^A-Za-z0-9_-])nproc([^A-Za-z0-9_-]|$)'
  '(^|[;&|(]|then|do|else)[[:space:]]*timeout[[:space:]]'
  'sed -i|sed [^|;]*--in-place'
  'readlink -f|realpath -'
  'dd [^|;]*(oflag|iflag|status)='
  'grep -[A-Za-z]*P|xargs -r|sort -V|find [^|;]*-printf|head -n -|head -c -|tail -c -|du -b|base64 -w|wc -L'
  '(^|[^A-Za-z0-9_-])tac([^A-Za-z0-9_-]|$)'
)
for f in "${files[@]}"; do
  [[ $f == scripts/lib/host.sh || $f == tests/scripts/lint.sh ]] && continue
  for re in "${gnu[@]}"; do
    while IFS= read -r hit; do
      [[ -n $hit ]] && report "$hit: GNU-only; macOS lacks it (use scripts/lib/host.sh, or a portable form)"
    done < <(grep_code "$f" "$re")
  done
  # sha256sum is GNU's; macOS has shasum -a 256: a line naming one must name the other.
  while IFS= read -r hit; do
    [[ -n $hit && $hit != *shasum* ]] && report "$hit: sha256sum is GNU-only; fall back to shasum -a 256"
  done < <(grep_code "$f" 'sha256sum')
done

# 4. Scripts meant to be run can be.
for f in "${files[@]}"; do
  [[ $f == scripts/lib/* ]] && continue
  if [[ $(head -c 2 "$f") == '#!' && ! -x $f ]]; then
    report "$f:1: starts with #! but is not executable (chmod +x, and commit the mode)"
  fi
done

echo "lint: ${#files[@]} scripts, $problems problems"
[[ $problems -eq 0 ]]
