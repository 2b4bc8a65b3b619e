#!/usr/bin/env bash
# Crash loop (docs/reliability.md): kill `hearth serve` with SIGKILL at random moments while
# it serves and writes its disk tier, restart it on the same --cache-dir, and check that
#  - it starts every time,
#  - a greedy reply equals a fresh server's (--no-cache) reply to the same request,
#  - no state file is ever quarantined (a kill must never leave a partial file under a
#    state's name).
# Half the loops kill while requests run, half once the server has been idle for about a
# second, when write-behind copies its states to disk.
#
# Usage: crash-loop.sh HEARTH MODEL.gguf [LOOPS]      (LOOPS: 100 unless given)
# Env: CRASH_LOOP_SEED (random seed), CRASH_LOOP_KEEP=1 (keep the work folder),
#      CRASH_LOOP_SABOTAGE=1 (overwrite the last two thirds of every state file with random
#      bytes before each restart: the checksums must catch it; with them disabled, replies go wrong and this
#      script fails, which shows that it can).
# Prints one line per loop and a summary; exits 1 on any wrong or missing reply, failed
# start or quarantined file (sabotage expects quarantined files).
set -uo pipefail
hearth=$1 model=$2 loops=${3:-100}
seed=${CRASH_LOOP_SEED:-$RANDOM}
sabotage=${CRASH_LOOP_SABOTAGE:-0}
RANDOM=$seed
# shellcheck source=lib/hearth-serve.sh
source "$(dirname "$0")/lib/hearth-serve.sh"
# shellcheck source=lib/host.sh
source "$(dirname "$0")/lib/host.sh"
work=$(mktemp -d)
states=$work/states
mkdir -p "$work/ref"
server_pid="" ref_pid="" ref_port=""
cleanup() {
  [[ -n "$server_pid" ]] && kill -9 "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  [[ -n "$ref_pid" ]] && kill -9 "$ref_pid" 2>/dev/null && wait "$ref_pid" 2>/dev/null
  if [[ "${CRASH_LOOP_KEEP:-0}" == 1 ]]; then echo "crash_loop: work folder $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
die() { echo "crash_loop: $*" >&2; exit 1; }
flags=(-m "$model" -t 1 -c 4096 -P 2 --cache-seqs 2)

n_convs=4 max_turns=5
turn=()  # conversation -> the turn its next check asks for
for c in $(seq 0 $((n_convs - 1))); do turn[c]=1; done

# messages C K: conversation C up to its user turn K, earlier replies from the reference.
messages() {
  local c=$1 k=$2 m i
  m=$(jq -nc --arg s "You answer briefly. Conversation $c." '[{role: "system", content: $s}]')
  for i in $(seq 1 "$k"); do
    m=$(jq -c --arg u "Turn $i of conversation $c: list $((i + 2)) things about topic $((c * 7 + i))." \
          '. + [{role: "user", content: $u}]' <<<"$m")
    if ((i < k)); then
      m=$(jq -c --argjson r "$(reference "$c" "$i")" '. + [{role: "assistant", content: $r[0], reasoning_content: $r[1]}]' <<<"$m")
    fi
  done
  echo "$m"
}
# What a greedy reply is compared by: the text and the reasoning (the tiny model's few
# tokens are often all reasoning). Six tokens: a wrong state shows at the first; past a
# few, random weights meet near ties, where a resumed prompt (its last token or two
# prefilled alone) and a cold one round differently within the logit tolerance that
# WarmEqualsColdTest checks: seed 24182 took another 10th token than --no-cache did.
reply_of='.choices[0].message | [.content // "", .reasoning_content // ""]'
body() { jq -c "{messages: ., max_tokens: 6, temperature: 0${2:+, stream: true}}" <<<"$1"; }
# reference C K: the fresh server's reply (a JSON string) to messages C K, computed once.
reference() {
  local f=$work/ref/$1-$2.json
  if [[ ! -s $f ]]; then
    curl -sf --max-time 120 "http://127.0.0.1:$ref_port/v1/chat/completions" -H 'content-type: application/json' \
      -d "$(body "$(messages "$1" "$2")")" | jq -c "$reply_of" >"$f.part" \
      || die "the reference server did not answer"
    # An empty reply would make every comparison pass.
    [[ $(jq -r 'join("")' "$f.part") != "" ]] || die "the reference reply to conversation $1 turn $2 is empty"
    mv "$f.part" "$f"
  fi
  cat "$f"
}

start_hearth "$work/ref.out" "$work/ref.err" "${flags[@]}" --no-cache || die "the reference server did not start"
ref_pid=$server_pid ref_port=$port server_pid=

failed_starts=0 wrong=0 unanswered=0 quarantined=0 tmp_left=0 disk_resumes=0 loop_ok=0
for loop in $(seq 1 "$loops"); do
  # Evidence that kills land inside writes: temporaries the next start will delete.
  # (The disk tier lives in $states/states-<model and layout hash>/.)
  if compgen -G "$states/states-*/*.tmp.*" >/dev/null; then ((tmp_left++)); fi
  if [[ $sabotage == 1 && -d $states ]]; then
    for f in "$states"/states-*/*.state; do
      [[ -f $f ]] || continue
      # A header is a few hundred bytes: what follows the first third is payload.
      size=$(file_size "$f") keep=$((size / 3))
      { head -c "$keep" "$f"; head -c $((size - keep)) /dev/urandom; } >"$f.sabotage" && mv "$f.sabotage" "$f"
    done
  fi
  if ! start_hearth "$work/serve.out" "$work/serve-$loop.err" "${flags[@]}" --cache-dir "$states" \
       --cache-ram 8 --cache-disk 64 2>/dev/null; then
    ((failed_starts++))
    echo "crash_loop: loop $loop: FAILED START"; tail -5 "$work/serve-$loop.err"
    kill -9 "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; server_pid=
    continue
  fi
  n_q=$(find "$states" -path '*/quarantine/*' -type f 2>/dev/null | wc -l)

  # The check: one conversation's next turn, alone on the server, against the reference.
  c=$((RANDOM % n_convs)) k=${turn[$c]}
  want=$(reference "$c" "$k")
  r=$(curl -s --max-time 120 "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
        -d "$(body "$(messages "$c" "$k")")")
  got=$(jq -c "$reply_of" <<<"$r" 2>/dev/null)
  tier=$(jq -r '.usage.hearth_cache.tier // "none"' <<<"$r" 2>/dev/null)
  cached=$(jq -r '.usage.prompt_tokens_details.cached_tokens // 0' <<<"$r" 2>/dev/null)
  [[ $tier == disk ]] && ((disk_resumes++))
  verdict=ok
  if [[ -z "$got" ]]; then
    ((unanswered++)); verdict="NO ANSWER (body: ${r:0:300})"
  elif [[ "$got" != "$want" ]]; then
    ((wrong++)); verdict="WRONG: got $got want $want (body: ${r:0:300})"
  fi
  if ((n_q > quarantined)); then
    [[ $sabotage == 1 ]] || verdict="$verdict; QUARANTINED $((n_q - quarantined)) file(s)"
    quarantined=$n_q
  fi
  [[ $verdict == ok ]] && ((loop_ok++))
  turn[c]=$((k % max_turns + 1))

  # Load: the next turns of two other conversations (one streamed and cut short), then the
  # kill, either while they run or about a second after the server went idle.
  loaders=()
  for j in 1 2; do
    c2=$(((c + j) % n_convs)) k2=${turn[$c2]}
    if ((j == 2 && RANDOM % 2 == 0)); then
      curl -sN --max-time 0.$((RANDOM % 9 + 1)) "http://127.0.0.1:$port/v1/chat/completions" \
        -H 'content-type: application/json' -d "$(body "$(messages "$c2" "$k2")" stream)" >/dev/null 2>&1 &
    else
      curl -s --max-time 60 "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
        -d "$(body "$(messages "$c2" "$k2")")" >/dev/null 2>&1 &
    fi
    loaders+=($!)
  done
  if ((loop % 2)); then
    # Up to 1.5 s, in hundredths (BSD sleep takes a decimal, not an exponent).
    t=$((RANDOM % 150)); when="serving"; sleep "$((t / 100)).$((t % 100 / 10))$((t % 10))"
  else
    wait ${loaders[@]+"${loaders[@]}"} 2>/dev/null
    t=$((10 + RANDOM % 20)); when="idle"; sleep "$((t / 10)).$((t % 10))"
  fi
  kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=
  wait ${loaders[@]+"${loaders[@]}"} 2>/dev/null
  n_files=$(find "$states" -maxdepth 2 -name '*.state' | wc -l)
  echo "crash_loop: loop $loop: conv $c turn $k reused $cached ($tier), killed while $when, $n_files state files: $verdict"
done

echo "crash_loop: seed $seed: $loops loops, $wrong wrong replies, $unanswered unanswered, $failed_starts failed starts," \
     "$quarantined quarantined files, $disk_resumes checks resumed from disk," \
     "$tmp_left kills left a temporary (killed mid-write)"
((wrong == 0 && unanswered == 0 && failed_starts == 0)) || exit 1
[[ $sabotage == 1 ]] || ((quarantined == 0)) || exit 1
# A run that never resumed from disk checked nothing about the disk tier.
((loops < 4 || sabotage == 1 || disk_resumes > 0)) || die "no check resumed from disk"
echo "crash_loop: ok"
