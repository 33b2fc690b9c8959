#!/usr/bin/env bash
# Compares glint's logits with llama.cpp's on one GGUF file, step by step:
# llama.cpp (the peer: ../shared/peers/build-llama.sh cpu .peer/llama.cpp-cpu)
# is forced along glint's greedy ids, with both engines at their defaults
# (f16 KV cache) and then both at f32, on each glint backend.
#   scripts/vs-llamacpp.sh FILE.gguf [PROMPT] [STEPS]
# BACKENDS (default: cpu, plus opencl where a device answers) and
# GLINT_LLAMACPP (the peer's bin folder) may be set. Exit status 2 when a
# run misses the bar (95% of steps within 2e-3, argmax equal but at near-ties).
set -euo pipefail
cd "$(dirname "$0")/.."
file=${1:?usage: scripts/vs-llamacpp.sh FILE.gguf [PROMPT] [STEPS]}
prompt=${2:-Sam found a shiny}
steps=${3:-24}
go build -o bin/generate ./cmd/generate
if [ -z "${BACKENDS:-}" ]; then
	BACKENDS=cpu
	bin/generate devices >/dev/null 2>&1 && BACKENDS="cpu opencl"
fi
status=0
for b in $BACKENDS; do
	for ct in f16 f32; do
		echo "== $file: glint $b vs llama.cpp, $ct KV cache, \"$prompt\", $steps steps"
		bin/generate parity -m "$file" -p "$prompt" -n "$steps" -b "$b" --backends "$b" -ctk $ct -ctv $ct \
			--llamacpp auto 2>/dev/null || status=2
	done
done
exit $status
