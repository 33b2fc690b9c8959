#!/usr/bin/env bash
# Speculative decoding beside llama.cpp's examples on the same files and
# prompt: glint plain, glint --spec-type ngram-simple, glint -md DRAFT, and
# llama-lookup and llama-speculative, alternated over ROUNDS rounds. Prints
# each run's tokens per target pass and TBT, and the medians.
#
#   scripts/spec-bench.sh [-r ROUNDS] [-n TOKENS] [-t THREADS] [-m MODEL] [-d DRAFT] [-p PEERBIN] [PROMPT]
#
# Defaults: stories260K drafted by its Q4_0 (../shared/models), "Once upon a
# time", 200 greedy tokens, --draft-max 8, 3 rounds, the peer at
# .peer/llama.cpp-cpu/build/bin. Build glint first (make build: bin/generate).
set -euo pipefail
rounds=3 n=200 threads=2
m=../shared/models/stories260K/stories260K.gguf
d=../shared/models/stories260K/stories260K-Q4_0.gguf
peer=.peer/llama.cpp-cpu/build/bin
while getopts r:n:t:m:d:p: o; do
  case $o in
  r) rounds=$OPTARG ;; n) n=$OPTARG ;; t) threads=$OPTARG ;; m) m=$OPTARG ;; d) d=$OPTARG ;; p) peer=$OPTARG ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
prompt=${1:-Once upon a time}
gen=${GENERATE:-bin/generate}
[[ -x $gen ]] || { echo "spec-bench: $gen is not built (make build)" >&2; exit 1; }
for f in "$m" "$d"; do [[ -f $f ]] || { echo "spec-bench: $f: no such file" >&2; exit 1; }; done
havepeer=1
[[ -x $peer/llama-lookup && -x $peer/llama-speculative ]] || { echo "spec-bench: no llama.cpp at $peer: glint only" >&2; havepeer=0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# glint NAME ARGS…: tokens per pass and TBT (ms) from generate's stderr.
glint() {
  local name=$1; shift
  "$gen" -m "$m" -p "$prompt" -n "$n" --temp 0 --ignore-eos -t "$threads" "$@" 2>"$tmp/err" >/dev/null
  local tbt perpass
  tbt=$(sed -n 's/^Avg TBT: \([0-9.]*\) ms.*/\1/p' "$tmp/err")
  perpass=$(awk '/^speculative:/ {print $2/$5; f=1} END {if (!f) print 1}' "$tmp/err")
  echo "$name $perpass $tbt" >>"$tmp/rows"
}

# peer NAME BINARY ARGS…: tokens per pass = predicted/(predicted − accepted).
peer() {
  local name=$1 bin=$2; shift 2
  "$peer/$bin" -m "$m" -p "$prompt" -n "$n" --temp 0 --draft-max 8 -t "$threads" "$@" >"$tmp/err" 2>&1
  awk -v name="$name" '
    /decoded/ {tok=$2; sec=$5}
    /n_predict/ {pred=$3}
    /n_accept/ {acc=$3}
    END {printf "%s %.3f %.3f\n", name, pred/(pred-acc), 1000*sec/tok}' "$tmp/err" >>"$tmp/rows"
}

for r in $(seq "$rounds"); do
  echo "round $r/$rounds" >&2
  glint glint-plain
  glint glint-ngram-simple --spec-type ngram-simple --draft-max 8
  glint glint-draft -md "$d" --draft-max 8
  if ((havepeer)); then
    peer llama-lookup llama-lookup
    peer llama-speculative llama-speculative -md "$d"
  fi
done

echo "run                 tokens/pass  TBT ms   (medians of $rounds rounds; $n tokens, \"$prompt\")"
for name in glint-plain glint-ngram-simple glint-draft llama-lookup llama-speculative; do
  grep "^$name " "$tmp/rows" >/dev/null || continue
  pp=$(awk -v k="$name" '$1==k {print $2}' "$tmp/rows" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  tb=$(awk -v k="$name" '$1==k {print $3}' "$tmp/rows" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf "%-19s %11.2f  %7.3f\n" "$name" "$pp" "$tb"
done
