#!/usr/bin/env bash
# Builds the ggml matmul timers of scripts/ggml-mmbench/ against a built llama.cpp peer, into
# .peer/mmbench/ (git-ignored): measuring instruments to set one of glint's kernels beside
# ggml's MUL_MAT on the same shape, never part of glint.
#   scripts/ggml-mmbench.sh [PEER_DIR]   (default .peer/llama.cpp-cpu, as built by
#   ../shared/peers/build-llama.sh cpu .peer/llama.cpp-cpu; an AVX2 peer gives the -avx2 names
#   when PEER_DIR ends in -avx2)
# Then, e.g.: .peer/mmbench/mmbench F16 8192 2048 128 10 2
#             .peer/mmbench/mmbench-stream F16 2048 8192 1 20 2
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${1:-.peer/llama.cpp-cpu}
lib=$(cd "$peer/build/bin" && pwd)
suffix=""
case $peer in *-avx2 | *-avx2/) suffix=-avx2 ;; esac
mkdir -p .peer/mmbench
for src in mmbench mmbench-stream; do
	cc -O2 "scripts/ggml-mmbench/$src.c" -I"$peer/ggml/include" -L"$lib" -lggml -lggml-base -lggml-cpu \
		-Wl,-rpath,"$lib" -o ".peer/mmbench/$src$suffix"
	echo "built .peer/mmbench/$src$suffix (against $lib)"
done
