#!/usr/bin/env bash
# Races glint's CPU backend against llama.cpp's llama-bench on the same
# Llama-3.2-1B-shaped files, alternating the two engines round by round, and
# prints a markdown table of medians and glint/llama.cpp ratios on stdout
# (progress on stderr). A benchmark: never part of `make test` or CI.
#   scripts/bench-vs-llamacpp.sh [-p PEER_BIN] [-r ROUNDS] [-t THREADS] [-n TOKENS] [-x ARGS] [TYPE...]
# PEER_BIN: the peer's bin folder (default $GLINT_LLAMACPP, else
#   .peer/llama.cpp-cpu/build/bin; build it with
#   ../shared/peers/build-llama.sh cpu .peer/llama.cpp-cpu).
# TYPEs: Q4_0 Q8_0 F16 Q4_K_M by default; any llama-quantize type name.
# Each round times, per type: glint decode (`generate -n TOKENS`, its Avg
# TBT), glint prefill (a 128-token prompt: 128 / TTFT, from `generate
# report --runs 1`, which times a prompt after one that warms up, as
# llama-bench does) and llama-bench (`-p 128 -n TOKENS -r 1`: pp128 and
# tgTOKENS), glint first on even rounds
# and llama.cpp first on odd ones. GLINT_CPU_SIMD picks glint's kernel level;
# to stand in for an AVX2-only host on an AVX-512 one, run it with
# GLINT_CPU_SIMD=avx2 GLINT_GGML_FLAVOR=avx2 against a peer built with
# CMAKE_EXTRA="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# (glint then gives that build's bits, as it would on such a host).
# -x adds llama-bench arguments: on a machine other work keeps busy,
# `-x "--poll 0"` makes its idle threads sleep at once instead of spinning
# (llama.cpp's default, --poll 50, collapses when cores are shared; glint's
# threads poll 200 µs before they park).
# The files are made once into .cache/: `generate synth --shape llama3.2-1b
# --type F16` (with the Llama 3 vocabulary of ../shared when present), then
# the peer's llama-quantize (`generate quantize` is byte-identical), by
# scripts/llama3.2-1b.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${GLINT_LLAMACPP:-.peer/llama.cpp-cpu/build/bin}
rounds=3 threads=2 tokens=32 lbargs=""
while getopts "p:r:t:n:x:h" opt; do
	case $opt in
	p) peer=$OPTARG ;;
	r) rounds=$OPTARG ;;
	t) threads=$OPTARG ;;
	n) tokens=$OPTARG ;;
	x) lbargs=$OPTARG ;;
	*)
		sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(Q4_0 Q8_0 F16 Q4_K_M)
if [ ! -x "$peer/llama-bench" ] || [ ! -x "$peer/llama-quantize" ]; then
	echo "bench-vs-llamacpp: no llama-bench/llama-quantize in $peer; build the peer with" >&2
	echo "  ../shared/peers/build-llama.sh cpu .peer/llama.cpp-cpu   (or set GLINT_LLAMACPP / -p)" >&2
	exit 1
fi
log() { echo "$*" >&2; }

go build -o bin/generate ./cmd/generate
scripts/llama3.2-1b.sh "$peer" "${types[@]}"
file() { echo ".cache/llama3.2-1b-$1.gguf"; }

ids=$(seq -s, 1 128)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
level=? flavour=?

# glint_run TYPE: appends the decode TBT (ms) and the pp128 speed (t/s).
glint_run() {
	local f out
	f=$(file "$1")
	out=$(bin/generate -m "$f" -b cpu -t "$threads" -p "Once upon a time" -n "$tokens" --temp 0 --ignore-eos 2>&1 >/dev/null)
	level=$(sed -n 's/.*threads, \([a-z0-9]*\) kernels.*/\1/p' <<<"$out" | head -1)
	flavour=$(sed -n 's/.*llama.cpp \([a-z0-9]*\) arithmetic.*/\1/p' <<<"$out" | head -1)
	sed -n 's/^Avg TBT: \([0-9.]*\) ms.*/\1/p' <<<"$out" >>"$tmp/$1.gtbt"
	# As llama-bench does, one prompt warms up and the next is timed.
	bin/generate report -b cpu -m "$f" -t "$threads" --prompt-ids "$ids" -n 2 --runs 1 --out "$tmp/report" 2>/dev/null |
		awk -F"|" '$2 ~ /cpu/ {printf "%.2f\n", 128000 / $5}' >>"$tmp/$1.gpp"
}

# llama_run TYPE: appends llama-bench's TBT (ms) and pp128 speed (t/s).
llama_run() {
	# shellcheck disable=SC2086 # lbargs is a list of arguments
	"$peer/llama-bench" -m "$(file "$1")" -p 128 -n "$tokens" -t "$threads" -r 1 -o csv $lbargs 2>/dev/null |
		awk -F, -v tbt="$tmp/$1.ltbt" -v pp="$tmp/$1.lpp" -v info="$tmp/peer" '
			{ gsub(/"/, "") }
			NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
			NR == 2 { print $col["cpu_info"] > info }
			$col["n_prompt"] > 0 { printf "%.2f\n", $col["avg_ts"] >> pp }
			$col["n_gen"] > 0 { printf "%.2f\n", 1000 / $col["avg_ts"] >> tbt }'
}

for ((r = 0; r < rounds; r++)); do
	for t in "${types[@]}"; do
		log "== round $((r + 1))/$rounds: $t"
		if ((r % 2 == 0)); then
			glint_run "$t"
			llama_run "$t"
		else
			llama_run "$t"
			glint_run "$t"
		fi
	done
done

# stat FILE: "median (min–max)" of the numbers in FILE.
stat() { sort -g "$1" | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f (%.1f–%.1f)", m, v[1], v[NR]}'; }
median() { sort -g "$1" | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'; }
# paired A B: the median of the per-round ratios of the numbers in files A
# and B (line r of each is round r), in brackets: each round runs the two
# engines back to back, so a ratio within a round cancels the drift of a
# shared machine's speed between rounds, which the medians keep.
paired() { paste "$1" "$2" | awk '{print $1 / $2}' >"$tmp/paired"; printf "(%.2f×)" "$(median "$tmp/paired")"; }

echo "glint ($level kernels, llama.cpp $flavour arithmetic) vs llama.cpp ($peer, $(cat "$tmp/peer" 2>/dev/null || echo ?)), $threads threads${lbargs:+, llama-bench $lbargs}, Llama-3.2-1B-shaped files, medians of $rounds alternated rounds (min–max); ratios of the medians (the median of the rounds' own ratios):"
echo
echo "| type | TBT glint ms | TBT llama.cpp ms | TBT glint/llama.cpp | pp128 glint t/s | pp128 llama.cpp t/s | pp128 glint/llama.cpp |"
echo "|---|--:|--:|--:|--:|--:|--:|"
for t in "${types[@]}"; do
	echo "| $t | $(stat "$tmp/$t.gtbt") | $(stat "$tmp/$t.ltbt") | $(ratio "$(median "$tmp/$t.gtbt")" "$(median "$tmp/$t.ltbt")") $(paired "$tmp/$t.gtbt" "$tmp/$t.ltbt") |" \
		"$(stat "$tmp/$t.gpp") | $(stat "$tmp/$t.lpp") | $(ratio "$(median "$tmp/$t.gpp")" "$(median "$tmp/$t.lpp")") $(paired "$tmp/$t.gpp" "$tmp/$t.lpp") |"
done
