#!/usr/bin/env bash
# Races glint's CPU backend against llama.cpp at long contexts (issue #40):
# for each context size N, a prompt of N−64 tokens then 32 decoded tokens,
# glint by `generate report -c N --prompt-ids …` (its TTFT after a warm-up
# run, and its median TBT), llama.cpp by `llama-batched-bench -c N
# -npp N−64 -ntg 32 -npl 1`, without and with -fa (flash attention), the
# three alternated round by round (glint first on even rounds, last on odd
# ones). Prints a markdown table on stdout (on stderr each run's TBT and the
# 1-minute load average after it, which tells a loaded run): medians,
# and glint's ratios to llama.cpp's better of the two (TBT glint/llama.cpp,
# lower is better; prompt t/s glint/llama.cpp, higher is better). A
# benchmark: never part of `make test` or CI.
#   scripts/longctx-bench.sh [-a] [-m MODEL] [-p PEER_BIN] [-r ROUNDS] [-t THREADS] [-x ARGS] [N...]
# N: context sizes (default 4096 16384). MODEL: default
#   .cache/llama3.2-1b-Q4_0.gguf (scripts/llama3.2-1b.sh makes it).
# -a: the AVX2 variant, standing in for an AVX2-only host on an AVX-512
#   one: glint at GLINT_CPU_SIMD=avx2 GLINT_GGML_FLAVOR=avx2 against the
#   peer built for AVX2 (default PEER_BIN .peer/llama.cpp-avx2/build/bin),
#   else the host's best against .peer/llama.cpp-cpu/build/bin.
# -x adds llama-batched-bench arguments (`-x "--poll 0"` where other work
# shares the cores).
set -euo pipefail
cd "$(dirname "$0")/.."
model=.cache/llama3.2-1b-Q4_0.gguf peer="" rounds=1 threads=2 lbargs="" avx2=0
while getopts "am:p:r:t:x:h" opt; do
	case $opt in
	a) avx2=1 ;;
	m) model=$OPTARG ;;
	p) peer=$OPTARG ;;
	r) rounds=$OPTARG ;;
	t) threads=$OPTARG ;;
	x) lbargs=$OPTARG ;;
	*)
		sed -n '2,21s/^# \{0,1\}//p' "$0" >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(4096 16384)
if ((avx2)); then
	peer=${peer:-.peer/llama.cpp-avx2/build/bin}
	export GLINT_CPU_SIMD=avx2 GLINT_GGML_FLAVOR=avx2
else
	peer=${peer:-.peer/llama.cpp-cpu/build/bin}
fi
if [ ! -x "$peer/llama-batched-bench" ]; then
	echo "longctx-bench: no llama-batched-bench in $peer; build the peer with ../shared/peers/build-llama.sh" >&2
	exit 1
fi
if [ ! -f "$model" ]; then
	echo "longctx-bench: no $model; make it with scripts/llama3.2-1b.sh" >&2
	exit 1
fi
log() { echo "$*" >&2; }

go build -o bin/generate ./cmd/generate
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
level=${GLINT_CPU_SIMD:-best} flavour=${GLINT_GGML_FLAVOR:-native}

# glint_run N: appends glint's TBT (ms) and prompt speed (t/s) at N cells.
glint_run() {
	local n=$1 p=$(($1 - 64)) out
	out=$(bin/generate report -b cpu -m "$model" -t "$threads" -c "$n" --prompt-ids "$(seq -s, 1 "$p")" -n 32 --runs 1 \
		--out "$tmp/report" 2>"$tmp/err") || {
		cat "$tmp/err" >&2
		exit 1
	}
	awk -F"|" -v p="$p" -v tbt="$tmp/$n.gtbt" -v pp="$tmp/$n.gpp" \
		'$2 ~ /cpu/ {printf "%.3f\n", $6 >> tbt; printf "%.2f\n", p * 1000 / $5 >> pp}' <<<"$out"
	log "   glint: TBT $(tail -n1 "$tmp/$n.gtbt") ms, load $(cut -d" " -f1 /proc/loadavg)"
}

# llama_run N FA: appends llama.cpp's TBT (ms) and prompt speed (t/s) at N
# cells, FA "-fa" or "".
llama_run() {
	local n=$1 fa=$2 tag=l${2:+fa}
	# shellcheck disable=SC2086 # lbargs is a list of arguments
	"$peer/llama-batched-bench" -m "$model" -t "$threads" -c "$n" -npp $((n - 64)) -ntg 32 -npl 1 $fa $lbargs 2>/dev/null |
		awk -F"|" -v tbt="$tmp/$n.${tag}tbt" -v pp="$tmp/$n.${tag}pp" \
			'$2 ~ /^ *[0-9]+ *$/ && $3 ~ /^ *32 *$/ {printf "%.3f\n", 1000 * $8 / 32 >> tbt; printf "%.2f\n", $7 >> pp}'
	log "   llama.cpp${fa:+ $fa}: TBT $(tail -n1 "$tmp/$n.${tag}tbt") ms, load $(cut -d" " -f1 /proc/loadavg)"
}

for ((r = 0; r < rounds; r++)); do
	for n in "${sizes[@]}"; do
		log "== round $((r + 1))/$rounds: $n cells"
		if ((r % 2 == 0)); then
			glint_run "$n"
			llama_run "$n" ""
			llama_run "$n" -fa
		else
			llama_run "$n" -fa
			llama_run "$n" ""
			glint_run "$n"
		fi
	done
done

median() { sort -g "$1" | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'; }
best() { awk -v a="$1" -v b="$2" -v hi="$3" 'BEGIN {print (hi ? (a > b ? a : b) : (a < b ? a : b))}'; }

echo "glint ($level kernels, llama.cpp $flavour arithmetic, $model) vs llama.cpp ($peer, no -fa / -fa), $threads threads${lbargs:+, $lbargs}, medians of $rounds alternated rounds; ratios to llama.cpp's better:"
echo
echo "| cells | TBT glint ms | TBT llama.cpp ms | TBT llama.cpp -fa ms | TBT ratio | prompt glint t/s | prompt llama.cpp t/s | prompt llama.cpp -fa t/s | prompt ratio |"
echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for n in "${sizes[@]}"; do
	gt=$(median "$tmp/$n.gtbt") lt=$(median "$tmp/$n.ltbt") ft=$(median "$tmp/$n.lfatbt")
	gp=$(median "$tmp/$n.gpp") lp=$(median "$tmp/$n.lpp") fp=$(median "$tmp/$n.lfapp")
	echo "| $n | $gt | $lt | $ft | $(ratio "$gt" "$(best "$lt" "$ft" 0)") | $gp | $lp | $fp | $(ratio "$gp" "$(best "$lp" "$fp" 1)") |"
done
