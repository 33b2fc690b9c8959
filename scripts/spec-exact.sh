  err=$(mktemp)
  specids=$("$gen" -m "$target" -b "$b" -md "$draft" --prompt-ids "$ids" -n "$n" --temp 0 --output ids 2>"$err")
  spec=$(grep '^speculative:' "$err" || true)
  rm -f "$err"
#!/usr/bin/env bash
# Speculative decoding never changes the answer, on real-sized files: the
# 1B-shaped F16 file (scripts/llama3.2-1b.sh) drafted by its Q4_0
# quantisation gives plain decoding's greedy ids, on each backend named.
#
#   scripts/spec-exact.sh [-n TOKENS] [BACKEND ...]     (default: 32 tokens, cpu opencl)
set -euo pipefail
n=32
if [[ ${1:-} == -n ]]; then n=$2; shift 2; fi
backends=("$@")
((${#backends[@]})) || backends=(cpu opencl)
gen=${GENERATE:-bin/generate}
target=${TARGET:-.cache/llama3.2-1b-F16.gguf}
draft=${DRAFT:-.cache/llama3.2-1b-Q4_0.gguf}
[[ -x $gen ]] || { echo "spec-exact: $gen is not built (make build)" >&2; exit 1; }
for f in "$target" "$draft"; do [[ -f $f ]] || { echo "spec-exact: $f: no such file (scripts/llama3.2-1b.sh)" >&2; exit 1; }; done
ids=128000,791,6864,315,9822,374 # "The capital of France is"
status=0
for b in "${backends[@]}"; do
  plain=$("$gen" -m "$target" -b "$b" --prompt-ids "$ids" -n "$n" --temp 0 --output ids 2>/dev/null)
  err=$(mktemp)
  specids=$("$gen" -m "$target" -b "$b" -md "$draft" --prompt-ids "$ids" -n "$n" --temp 0 --output ids 2>"$err")
  spec=$(grep '^speculative:' "$err" || true)
  rm -f "$err"
  if [[ -n $plain && $plain == "$specids" ]]; then
    echo "$b: the same $n ids ($spec)"
  else
    echo "$b: DIFFERENT ids: plain [$plain] speculative [$specids]"
    status=1
  fi
done
exit $status
