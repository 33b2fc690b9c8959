#!/usr/bin/env bash
# Makes the Llama-3.2-1B-shaped benchmark files once into .cache/ (git-ignored):
# .cache/llama3.2-1b-F16.gguf by `generate synth --shape llama3.2-1b --type F16`
# (with the Llama 3 vocabulary of ../shared when present), then
# .cache/llama3.2-1b-TYPE.gguf for each TYPE by the peer's llama-quantize
# (`generate quantize` is byte-identical). Files already there are kept.
#   scripts/llama3.2-1b.sh PEER_BIN TYPE...
# Progress goes to stderr; bin/generate must be built.
set -euo pipefail
cd "$(dirname "$0")/.."
peer=$1
shift
shared=${GLINT_SHARED:-../shared}
vocab=$shared/models/llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf
mkdir -p .cache
base=.cache/llama3.2-1b-F16.gguf
if [ ! -f "$base" ]; then
	vflag=()
	[ -f "$vocab" ] && vflag=(--vocab "$vocab")
	echo "== making $base" >&2
	bin/generate synth --shape llama3.2-1b --type F16 "${vflag[@]}" -o "$base.part" >&2
	mv "$base.part" "$base"
fi
for t in "$@"; do
	f=.cache/llama3.2-1b-$t.gguf
	if [ ! -f "$f" ]; then
		echo "== making $f (llama-quantize $t)" >&2
		"$peer/llama-quantize" "$base" "$f.part" "$t" >/dev/null 2>&1 || {
			echo "llama-quantize $t failed" >&2
			exit 1
		}
		mv "$f.part" "$f"
	fi
done
