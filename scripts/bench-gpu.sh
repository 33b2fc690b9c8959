#!/usr/bin/env bash
# glint's OpenCL benchmark on a GPU machine without Go. `make bench-gpu` fills
# this script's folder (dist/: the stripped generate binary, the OpenCL and
# layers test binaries, the Llama 3 vocabulary and the llama.cpp peer's
# sources where ../shared has them); on a lent machine run, carrying dist/,
#
#     bash dist/bench-gpu.sh --quick --batch
#
# Every stage runs under a timeout and is skipped, with the reason, where
# what it needs is absent; the stages' wall times and the results go to
# OUT_DIR/summary.md (default dist/out; copied into $OUT as well where the
# device tool sets it). Stages:
#   setup    the OpenCL loader (the system's, else CUDA's) and the GPU's driver
#            registered with it (generate devices --register), the device list
#   peer     (--llamacpp build) llama.cpp built with CUDA, in the background
#   tests    the OpenCL suite on the GPU (a subset with --quick), and the
#            llama.cpp greedy records where the staged files are (GLINT_SHARED)
#   models   Q4_0, Q4_K_M and F16 files of --shape by generate synth
#   parity   generate parity, CPU against OpenCL, per type
#   decode   per round, type and --sweep tuning: TTFT and TBT of a 128-token
#            prompt and 64 tokens (profiled: launches and bytes per token), TTFT
#            of a 512-token prompt; llama-bench -ngl 99 alternated with them
#   batch    (--batch) prompts of --pp tokens per type and --batch-sweep tuning,
#            llama-bench -p alternated; generate batched-bench --npl; serve-bench
#            against generate serve and llama-server at --parallel 1, 4, 8
# Options:
#   --quick            a fast test subset (the default is the whole suite)
#   --batch            add the batch stage
#   --shape S          synth shape (default llama3.2-1b where there is a GPU,
#                      else small; the dry run on PoCL takes small)
#   --types "T ..."    weight types (default "Q4_0 Q4_K_M F16")
#   --rounds N         alternated rounds (default 2 with a peer, else 1)
#   --runs N           timed runs per report (default 3)
#   --sweep "A B"      generate --tune values timed in the decode stage
#                      (default native; e.g. "native portable gemm=64 cpu")
#   --batch-sweep "A"  --tune values of the batch stage's prompts (default
#                      native; e.g. "gemm=64 gemm=128 gemm=256")
#   --pp "128 512"     batch prompt sizes (default 128 512 2048; small: 128 512 1024)
#   --npl 1,2,4        batched-bench counts (default 1,2,4,8,16)
#   --parallel "1 4"   serve --parallel values (default "1 4 8")
#   --llamacpp DIR|build  llama.cpp's bin folder, or build it (needs nvcc; also
#                      LLAMACPP=DIR in the environment)
#   --device SEL       OpenCL device (default: the first GPU, else the first)
#   --tests REGEX      the OpenCL tests to run (-test.run; --quick: a subset,
#                      smaller on a CPU device)
#   --timeout S        the longest one command may run (default 240 s)
#   --out DIR, --models DIR   results (dist/out), model files (/tmp/glint-bench-models)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gen="$here/generate"
quick=0 batch=0 shape="" types="Q4_0 Q4_K_M F16" rounds="" runs=3 sweep="native" bsweep="native"
pp="" npl="1,2,4,8,16" parallels="1 4 8" llamacpp="${LLAMACPP:-}" device="" cmdlimit=240 tests=""
out="$here/out" models="${MODELS:-${TMPDIR:-/tmp}/glint-bench-models}"
usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--batch) batch=1 ;;
	--shape) shape=$2; shift ;;
	--types) types=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--runs) runs=$2; shift ;;
	--sweep) sweep=$2; shift ;;
	--batch-sweep) bsweep=$2; shift ;;
	--pp) pp=$2; shift ;;
	--npl) npl=$2; shift ;;
	--parallel) parallels=$2; shift ;;
	--llamacpp) llamacpp=$2; shift ;;
	--device) device=$2; shift ;;
	--tests) tests=$2; shift ;;
	--timeout) cmdlimit=$2; shift ;;
	--out) out=$2; shift ;;
	--models) models=$2; shift ;;
	*) usage ;;
	esac
	shift
done
mkdir -p "$out/logs" "$models"
out="$(cd "$out" && pwd)"
stages="$out/stages.md" body="$out/body.md"
: >"$stages"
: >"$body"
t0=$(date +%s)

log() { echo "$*" >&2; }
md() { printf '%s\n' "$*" >>"$body"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
# tm LIMIT CMD...: CMD under a timeout; the whole process group is ended.
tm() { timeout -k 5 "$1" "${@:2}"; }
# stage NAME STATUS NOTE START: a row of the stage table.
stage() {
	printf '| %s | %s | %s | %s |\n' "$1" "$2" "$(secs "$4")" "$(esc "$3")" >>"$stages"
	case $2 in ok | skipped) ;; *) failed=1 ;; esac
	log "== stage $1: $2 ($(secs "$4") s) $3"
}
# esc TEXT: TEXT fit for a markdown table cell.
esc() { printf '%s' "$1" | sed 's/|/\\|/g'; }
failed=0
ids() { seq -s, 1 "$1"; }
# col FILE N: column N of the first opencl row of a report's table.
col() { awk -F'|' -v n="$2" '$2 ~ /^ *opencl *$/ {gsub(/^ +| +$/, "", $(n + 1)); print $(n + 1); exit}' "$1" 2>/dev/null; }
# lb FILE TEST: llama-bench's t/s (the mean) for TEST (pp128, tg64).
lb() { awk -F'|' -v t="$2" '{x = $(NF - 2); y = $(NF - 1); gsub(/ /, "", x)} x == t {split(y, a, "±"); gsub(/ /, "", a[1]); print a[1]; exit}' "$1" 2>/dev/null; }
ms() { awk -v n="$1" -v tps="$2" 'BEGIN {if (tps > 0) printf "%.2f", 1000 * n / tps; else printf "—"}'; }

# --- setup: loader, ICD, devices ------------------------------------------
s=$(now)
if ! ldconfig -p 2>/dev/null | grep -q 'libOpenCL\.so\.1 '; then
	for f in /usr/local/cuda/targets/*/lib/libOpenCL.so.1 /usr/local/cuda/lib64/libOpenCL.so.1; do
		if [ -e "$f" ]; then
			export GLINT_OPENCL_LIB="$f"
			export LD_LIBRARY_PATH="$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
			log "OpenCL loader: $f"
			break
		fi
	done
fi
if reg=$(tm 30 "$gen" devices --register "$out/icd" 2>"$out/logs/register.log"); then
	eval "$reg"
fi
tm 60 "$gen" devices >"$out/devices.txt" 2>&1
gpu=$(awk '/\(GPU,/ {sub(/:.*/, ""); print; exit}' "$out/devices.txt")
if [ -z "$device" ]; then
	device=${gpu:-0}
fi
if [ -n "$gpu" ]; then
	note="GPU: device $gpu"
else
	note="no OpenCL GPU: the figures are not a GPU's"
fi
[ -n "$shape" ] || { [ -n "$gpu" ] && shape=llama3.2-1b || shape=small; }
[ -n "$pp" ] || { [ "$shape" = small ] && pp="128 512 1024" || pp="128 512 2048"; }
if ! grep -q '^[0-9]*:' "$out/devices.txt"; then
	stage setup failed "no OpenCL device ($(head -c 200 "$out/devices.txt"))" "$s"
	device=""
else
	stage setup ok "$note; OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-(system)}" "$s"
fi

# --- peer: llama.cpp with CUDA, built in the background ---------------------
peerpid=""
if [ "$llamacpp" = build ]; then
	llamacpp=""
	export PATH="$PATH:/usr/local/cuda/bin"
	if [ -f "$here/peers/build-llama.sh" ] && command -v nvcc >/dev/null 2>&1; then
		(tm 420 bash "$here/peers/build-llama.sh" cuda /tmp/lcpp-cuda >"$out/logs/peer-build.log" 2>&1) &
		peerpid=$!
		peerstart=$(now)
	fi
	[ -n "$peerpid" ] || stage peer skipped "needs dist/peers/build-llama.sh (make bench-gpu copies it from ../shared) and nvcc" "$(now)"
elif [ -n "$llamacpp" ] && [ ! -x "$llamacpp/llama-bench" ]; then
	stage peer skipped "no llama-bench in $llamacpp" "$(now)"
	llamacpp=""
fi
[ -n "$rounds" ] || { [ -n "$llamacpp$peerpid" ] && rounds=2 || rounds=1; }

# --- tests --------------------------------------------------------------------
s=$(now)
if [ -z "$device" ]; then
	stage tests skipped "no OpenCL device" "$s"
else
	filter='.*'
	limit=1800
	if [ -n "$tests" ]; then
		filter=$tests limit=$cmdlimit
	elif [ $quick = 1 ] && [ -n "$gpu" ]; then
		filter='^(TestTiledGEMM|TestFusedDecode|TestMatMulTransposed|TestAttentionBits|TestFloatMatMulBits|TestMatMulActivationRounding|TestTuneSameBits|TestFastPaths)$'
		limit=$cmdlimit
	elif [ $quick = 1 ]; then
		# A CPU device compiles each variant for minutes: one matmul through a tuning.
		filter='^(TestParseTune|TestTiledGEMMPlan|TestTiledGEMMPlanCap|TestTuneSameBits)$'
		limit=$cmdlimit
	fi
	(cd "$out" && GLINT_OPENCL_DEVICES=$device tm "$limit" "$here/opencl.test" -test.run "$filter" -test.v -test.timeout "${limit}s" >"$out/logs/opencl-tests.log" 2>&1)
	rc=$?
	n_pass=$(grep -c -- '--- PASS' "$out/logs/opencl-tests.log")
	n_fail=$(grep -c -- '--- FAIL' "$out/logs/opencl-tests.log")
	n_skip=$(grep -c -- '--- SKIP' "$out/logs/opencl-tests.log")
	verdict=ok
	[ $rc = 0 ] || verdict="FAIL (exit $rc$([ $rc = 124 ] && echo ': timed out'))"
	stage tests "$verdict" "opencl.test ${filter:0:40}…: $n_pass passed, $n_fail failed, $n_skip skipped (logs/opencl-tests.log)" "$s"
	if [ $rc != 0 ]; then
		md "### OpenCL test failures"
		md '```'
		grep -- '--- FAIL' "$out/logs/opencl-tests.log" | head -20 >>"$body"
		tail -5 "$out/logs/opencl-tests.log" >>"$body"
		md '```'
	fi
	s=$(now)
	sh=${GLINT_SHARED:-$here/shared}
	[ -d "$sh/models" ] || [ ! -d "$here/../../shared/models" ] || sh=$(cd "$here/../../shared" && pwd)
	if [ $quick = 1 ] && [ -z "$gpu" ]; then
		stage greedy skipped "--quick on a CPU device (the records take minutes there)" "$s"
	elif [ -f "$sh/models/llamacpp_greedy_public.json" ]; then
		(cd "$out" && GLINT_SHARED=$sh GLINT_OPENCL_DEVICES=$device tm "$cmdlimit" "$here/layers.test" -test.run 'TestLlamaCppGreedy' -test.v >"$out/logs/greedy.log" 2>&1)
		rc=$?
		stage greedy "$([ $rc = 0 ] && echo ok || echo "FAIL (exit $rc)")" "llama.cpp greedy records: $(grep -c -- '--- PASS' "$out/logs/greedy.log") passed, $(grep -c -- '--- FAIL' "$out/logs/greedy.log") failed" "$s"
	else
		stage greedy skipped "no staged records (GLINT_SHARED=$sh/models/llamacpp_greedy_public.json absent)" "$s"
	fi
fi

# --- models -------------------------------------------------------------------
s=$(now)
vocab=()
[ -f "$here/ggml-vocab-llama3-bpe.gguf" ] && [ "$shape" = llama3.2-1b ] && vocab=(--vocab "$here/ggml-vocab-llama3-bpe.gguf")
pids=()
for t in $types; do
	m="$models/$shape-$t.gguf"
	[ -f "$m" ] && continue
	(tm "$cmdlimit" "$gen" synth --shape "$shape" --type "$t" "${vocab[@]}" -o "$m.part" >"$out/logs/synth-$t.log" 2>&1 && mv "$m.part" "$m") &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
have=""
for t in $types; do [ -f "$models/$shape-$t.gguf" ] && have="$have $t"; done
have=${have# }
stage models "$([ "$have" = "$types" ] && echo ok || echo partial)" "$shape: ${have:-none} in $models$([ ${#vocab[@]} -gt 0 ] && echo ', Llama 3 vocab')" "$s"

# --- parity -------------------------------------------------------------------
s=$(now)
if [ -z "$device" ]; then
	stage parity skipped "no OpenCL device" "$s"
else
	md "### Parity, CPU against OpenCL (16-token prompt, 16 steps, teacher-forced)"
	md ""
	md "| type | verdict | worst |"
	md "|---|---|---|"
	allok=ok
	for t in $have; do
		tm "$cmdlimit" "$gen" parity -m "$models/$shape-$t.gguf" --device "$device" --prompt-ids "$(ids 16)" -n 16 --backends cpu,opencl >"$out/logs/parity-$t.log" 2>&1
		rc=$?
		v=ok
		[ $rc = 0 ] || { v="FAIL (exit $rc)"; allok=FAIL; }
		md "| $t | $v | $(esc "$(grep 'worst' "$out/logs/parity-$t.log" | tail -1)") |"
	done
	md ""
	stage parity "$allok" "types: $have" "$s"
fi

# Waits for the peer before anything is timed (its build takes the CPUs).
if [ -n "$peerpid" ]; then
	wait "$peerpid"
	if [ -x /tmp/lcpp-cuda/build/bin/llama-bench ]; then
		llamacpp=/tmp/lcpp-cuda/build/bin
		stage peer ok "llama.cpp c392e509 CUDA in $llamacpp" "$peerstart"
	else
		stage peer failed "build failed or timed out: $(tail -2 "$out/logs/peer-build.log" | tr '\n' ' ')" "$peerstart"
	fi
fi

# --- decode: TTFT/TBT per round, type and tuning, llama-bench alternated -----
s=$(now)
if [ -z "$device" ]; then
	stage decode skipped "no OpenCL device" "$s"
else
	md "### Decode: 128-token prompt + 64 tokens (TTFT, TBT; profiled), TTFT of 512 tokens — $runs runs each, $rounds round(s)"
	md ""
	md "| type | engine | tune | round | TTFT128 ms | TBT ms | TBT p90 | launches/tok | device MB/tok | profiled ms/tok | TTFT512 ms |"
	md "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"
	fails=0
	for ((r = 1; r <= rounds; r++)); do
		for t in $have; do
			m="$models/$shape-$t.gguf"
			glint() {
				for tune in $sweep; do
					local d="$out/decode/$t-$tune-r$r"
					mkdir -p "$d"
					tm "$cmdlimit" "$gen" report -b opencl --device "$device" --tune "$tune" -m "$m" --prompt-ids "$(ids 128)" -n 64 --runs "$runs" --profile --out "$d/pp128" >"$d/pp128.md" 2>"$d/pp128.log" || fails=$((fails + 1))
					tm "$cmdlimit" "$gen" report -b opencl --device "$device" --tune "$tune" -m "$m" --prompt-ids "$(ids 512)" -n 2 --runs "$runs" --out "$d/pp512" >"$d/pp512.md" 2>"$d/pp512.log" || fails=$((fails + 1))
					prof=$(awk -F'|' '$2 ~ /^ *opencl *$/ {n++} n == 2 && $2 ~ /opencl/ {gsub(/ /, "", $(NF - 1)); print $(NF - 1); exit}' "$d/pp128.md")
					md "| $t | glint | $tune | $r | $(col "$d/pp128.md" 4) | $(col "$d/pp128.md" 5) | $(col "$d/pp128.md" 6) | $(col "$d/pp128.md" 10) | $(col "$d/pp128.md" 11) | ${prof:-—} | $(col "$d/pp512.md" 4) |"
				done
			}
			peer() {
				[ -n "$llamacpp" ] || return 0
				local f="$out/decode/$t-llamacpp-r$r.md"
				tm "$cmdlimit" "$llamacpp/llama-bench" -m "$m" -ngl 99 -p 128,512 -n 64 -r "$runs" >"$f" 2>"$f.log" || fails=$((fails + 1))
				md "| $t | llama.cpp | -ngl 99 | $r | $(ms 128 "$(lb "$f" pp128)") (pp) | $(ms 1 "$(lb "$f" tg64)") | | | | | $(ms 512 "$(lb "$f" pp512)") (pp) |"
			}
			if ((r % 2 == 1)); then glint; peer; else peer; glint; fi
		done
	done
	md ""
	md "TTFT128/TTFT512 are glint's time to first token (prompt + one step); llama.cpp's are its pp times (prompt only)."
	md ""
	stage decode "$([ $fails = 0 ] && echo ok || echo "$fails failed")" "types: $have; sweep: $sweep; peer: ${llamacpp:-none}" "$s"
fi

# --- batch: prompts, batched decode, serving -----------------------------------
# health PORT: whether the server there answers /health with 200 (bash's own
# /dev/tcp: the GPU image may lack curl).
health() {
	local line
	{ exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
	printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
	read -r -t 5 line <&3
	exec 3>&-
	[[ $line == *" 200"* ]]
}
# serve1 ENGINE NP FILE PORT: starts a server, measures it, stops it; prints tok/s.
serve1() {
	local engine=$1 np=$2 m=$3 port=$4 pid i res=""
	if [ "$engine" = glint ]; then
		"$gen" serve -m "$m" -b opencl --device "$device" -c 2048 --parallel "$np" --host 127.0.0.1 --port "$port" >"$out/logs/serve-$engine-$np.log" 2>&1 &
	else
		"$llamacpp/llama-server" -m "$m" -ngl 99 -c 2048 -np "$np" --host 127.0.0.1 --port "$port" >"$out/logs/serve-$engine-$np.log" 2>&1 &
	fi
	pid=$!
	for ((i = 0; i < 240; i++)); do
		health "$port" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if health "$port"; then
		res=$(tm "$cmdlimit" "$gen" serve-bench --url "http://127.0.0.1:$port" --clients 8 -n 32 --timeout "${cmdlimit}s" 2>>"$out/logs/serve-$engine-$np.log" | sed -n 's/.*tok_s=\([0-9.]*\).*/\1/p')
	fi
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 20; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	echo "${res:-—}"
}
if [ $batch = 1 ]; then
	s=$(now)
	if [ -z "$device" ]; then
		stage batch skipped "no OpenCL device" "$s"
	else
		fails=0
		md "### Batch: prompt processing (glint TTFT of N tokens; llama.cpp pp N), $runs runs each"
		md ""
		hdr="| type | engine | tune |"
		sep="|---|---|---|"
		for n in $pp; do hdr="$hdr pp$n ms |"; sep="$sep--:|"; done
		md "$hdr"
		md "$sep"
		pplist=$(echo "$pp" | tr ' ' ,)
		for t in $have; do
			m="$models/$shape-$t.gguf"
			for tune in $bsweep; do
				row="| $t | glint | $tune |"
				for n in $pp; do
					d="$out/batch/$t-$tune-pp$n"
					mkdir -p "$d"
					tm "$cmdlimit" "$gen" report -b opencl --device "$device" --tune "$tune" -m "$m" -c $((n + 64)) --prompt-ids "$(ids "$n")" -n 2 --runs "$runs" --out "$d" >"$d/report.md" 2>"$d/report.log" || fails=$((fails + 1))
					row="$row $(col "$d/report.md" 4) |"
				done
				md "$row"
			done
			if [ -n "$llamacpp" ]; then
				f="$out/batch/$t-llamacpp-pp.md"
				tm "$cmdlimit" "$llamacpp/llama-bench" -m "$m" -ngl 99 -p "$pplist" -n 0 -r "$runs" >"$f" 2>"$f.log" || fails=$((fails + 1))
				row="| $t | llama.cpp | -ngl 99 |"
				for n in $pp; do row="$row $(ms "$n" "$(lb "$f" "pp$n")") |"; done
				md "$row"
			fi
		done
		md ""
		md "### Batched decode: generate batched-bench --npl $npl (16-token prompts, 32 tokens each)"
		for t in $have; do
			md ""
			md "$t:"
			md '```'
			tm "$cmdlimit" "$gen" batched-bench -m "$models/$shape-$t.gguf" -b opencl --device "$device" -c 2048 --npl "$npl" --runs "$runs" >>"$body" 2>"$out/logs/batched-$t.log" || {
				fails=$((fails + 1))
				echo "failed: $(tail -1 "$out/logs/batched-$t.log")" >>"$body"
			}
			md '```'
		done
		md ""
		t=$(echo "$have" | awk '{print $1}')
		if [ -n "$t" ]; then
			m="$models/$shape-$t.gguf"
			md "### Serving: generate serve-bench, 8 clients × 32 tokens, -c 2048, $t, aggregate tok/s, alternated"
			md ""
			md "| --parallel | glint serve | llama-server -ngl 99 |"
			md "|--:|--:|--:|"
			port=$((${BENCH_PORT:-18480}))
			for np in $parallels; do
				port=$((port + 2))
				g=$(serve1 glint "$np" "$m" "$port")
				l="— (no peer)"
				[ -n "$llamacpp" ] && [ -x "$llamacpp/llama-server" ] && l=$(serve1 llama "$np" "$m" $((port + 1)))
				[ "$g" = — ] && fails=$((fails + 1))
				md "| $np | $g | $l |"
			done
			md ""
		fi
		stage batch "$([ $fails = 0 ] && echo ok || echo "$fails failed")" "pp: $pp; npl: $npl; parallel: $parallels; sweep: $bsweep" "$s"
	fi
fi

# --- summary -------------------------------------------------------------------
{
	echo "# glint OpenCL benchmark ($(date -u +%Y-%m-%dT%H:%MZ))"
	echo
	echo "- host: $(hostname), $(nproc) cores; options: $([ $quick = 1 ] && echo --quick) $([ $batch = 1 ] && echo --batch) --shape $shape --types \"$types\" --rounds $rounds --runs $runs --sweep \"$sweep\""
	echo "- devices (selected: ${device:-none}):"
	echo '```'
	cat "$out/devices.txt"
	echo '```'
	echo
	echo "| stage | status | wall s | note |"
	echo "|---|---|--:|---|"
	cat "$stages"
	echo "| total | | $(($(date +%s) - t0)) | |"
	echo
	cat "$body"
} >"$out/summary.md"
rm -f "$body"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ "$OUT" != "$out" ]; then
	cp -r "$out/." "$OUT/" 2>/dev/null
fi
log "== done in $(($(date +%s) - t0)) s: $out/summary.md"
cat "$out/summary.md"
exit $failed
