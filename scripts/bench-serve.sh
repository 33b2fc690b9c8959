	pid=""
#!/usr/bin/env bash
# Serving throughput: glint's `generate serve` against llama.cpp's llama-server
# on the same Llama-3.2-1B-shaped Q4_0 file, with the same --parallel, -c and
# threads. For every --parallel value each server is started fresh, measured by
# `generate serve-bench` (CLIENTS concurrent clients, each sending REQUESTS
# greedy /v1/completions of TOKENS tokens with ignore_eos, after one untimed
# warm-up) and stopped; glint goes first on even rounds, llama-server on odd
# ones. Prints a markdown table of aggregate generated tokens/s, medians
# (min–max) over the rounds, and glint/llama-server ratios on stdout (progress
# on stderr). A benchmark: never part of `make test` or CI.
#   scripts/bench-serve.sh [-p PEER_BIN] [-r ROUNDS] [-t THREADS] [-n TOKENS] [-c CTX]
#                          [-k CLIENTS] [-q REQUESTS] [-P "1 4 8"] [-x ARGS] [FILE]
# PEER_BIN: the peer's bin folder (default $GLINT_LLAMACPP, else
#   .peer/llama.cpp-cpu/build/bin; build it with
#   ../shared/peers/build-llama.sh cpu .peer/llama.cpp-cpu).
# FILE: default .cache/llama3.2-1b-Q4_0.gguf, made by scripts/llama3.2-1b.sh
#   when absent. -c is the whole context: both servers give each slot CTX/N.
# -x adds llama-server arguments. The servers listen on 127.0.0.1, on ports from
# $BENCH_PORT (default 18480) up, a new one for each start.
set -euo pipefail
cd "$(dirname "$0")/.."
peer=${GLINT_LLAMACPP:-.peer/llama.cpp-cpu/build/bin}
rounds=1 threads=2 tokens=32 ctx=2048 clients=8 requests=1 parallels="1 4 8" lsargs=""
port=$((${BENCH_PORT:-18480} - 1))
while getopts "p:r:t:n:c:k:q:P:x:h" opt; do
	case $opt in
	p) peer=$OPTARG ;;
	r) rounds=$OPTARG ;;
	t) threads=$OPTARG ;;
	n) tokens=$OPTARG ;;
	c) ctx=$OPTARG ;;
	k) clients=$OPTARG ;;
	q) requests=$OPTARG ;;
	P) parallels=$OPTARG ;;
	x) lsargs=$OPTARG ;;
	*)
		sed -n '2,20s/^# \{0,1\}//p' "$0" >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
default=.cache/llama3.2-1b-Q4_0.gguf
file=${1:-$default}
if [ ! -x "$peer/llama-server" ]; then
	echo "bench-serve: no llama-server in $peer; build the peer with" >&2
	echo "  ../shared/peers/build-llama.sh cpu .peer/llama.cpp-cpu   (or set GLINT_LLAMACPP / -p)" >&2
	exit 1
fi
log() { echo "$*" >&2; }

go build -o bin/generate ./cmd/generate
if [ ! -f "$file" ] && [ "$file" = "$default" ]; then
	scripts/llama3.2-1b.sh "$peer" Q4_0
fi
[ -f "$file" ] || {
	log "bench-serve: no $file"
	exit 1
}

tmp=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# ready: waits until the server's /health answers 200 (both answer 503
# while they load).
ready() {
	for ((i = 0; i < 600; i++)); do
		curl -sf -o /dev/null "http://127.0.0.1:$port/health" && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			log "the server exited:"
			tail -5 "$tmp/server.log" >&2
			return 1
		fi
		sleep 0.5
	done
	log "the server is not ready after 300 s"
	return 1
}

# run ENGINE N: starts ENGINE with --parallel N, measures it, stops it, and
# appends its tokens/s to $tmp/ENGINE.N.
run() {
	local engine=$1 np=$2 out
	# A fresh port for every start: a server just stopped may keep its
	# port a while (connections closing), which a new one cannot bind.
	port=$((port + 1))
	if [ "$engine" = glint ]; then
		bin/generate serve -m "$file" -b cpu -t "$threads" -c "$ctx" --parallel "$np" \
			--host 127.0.0.1 --port "$port" >"$tmp/server.log" 2>&1 &
	else
		# shellcheck disable=SC2086 # lsargs is a list of arguments
		"$peer/llama-server" -m "$file" -t "$threads" -c "$ctx" -np "$np" \
			--host 127.0.0.1 --port "$port" $lsargs >"$tmp/server.log" 2>&1 &
	fi
	pid=$!
	ready
	out=$(bin/generate serve-bench --url "http://127.0.0.1:$port" --clients "$clients" --requests "$requests" -n "$tokens")
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	pid=""
	sed -n 's/.*tok_s=\([0-9.]*\).*/\1/p' <<<"$out" >>"$tmp/$engine.$np"
	log "   $engine --parallel $np: $out"
}

for ((r = 0; r < rounds; r++)); do
	for np in $parallels; do
		log "== round $((r + 1))/$rounds: --parallel $np"
		if ((r % 2 == 0)); then
			run glint "$np"
			run llama "$np"
		else
			run llama "$np"
			run glint "$np"
		fi
	done
done

# stat FILE: "median (min–max)" of the numbers in FILE.
stat() { sort -g "$1" | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f (%.1f–%.1f)", m, v[1], v[NR]}'; }
median() { sort -g "$1" | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f×", a / b}'; }

echo "generate serve vs llama-server ($peer) on $file: $threads threads, -c $ctx, $clients clients × $requests request(s) of $tokens tokens, aggregate generated tokens/s, medians of $rounds alternated round(s) (min–max)${lsargs:+, llama-server $lsargs}:"
echo
echo "| --parallel | glint tok/s | llama-server tok/s | glint/llama-server |"
echo "|--:|--:|--:|--:|"
for np in $parallels; do
	echo "| $np | $(stat "$tmp/glint.$np") | $(stat "$tmp/llama.$np") | $(ratio "$(median "$tmp/glint.$np")" "$(median "$tmp/llama.$np")") |"
done
