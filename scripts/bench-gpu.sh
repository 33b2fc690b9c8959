#!/usr/bin/env bash
# glint's OpenCL benchmark on a GPU machine without Go. `make bench-gpu`
# builds this script's folder (dist/: the generate binary and the OpenCL and
# layers test binaries); copy the folder there and run
#
#     bash dist/bench-gpu.sh
#
# It finds an OpenCL loader (the system's, else CUDA's), registers the GPU's
# driver with it where the loader does not list it (generate devices
# --register), runs the OpenCL tests on every device, makes the
# Llama-3.2-1B-shaped synth models (Q4_0, Q8_0 and F16; Q4_K_M quantised
# from the F16 one) and runs, for each, generate report (decode TBT after a
# 128-token prompt, with --profile; TTFT of 128- and 512-token prompts) and
# generate parity of the CPU and the GPU. Results go to out/ beside it.
#
# LLAMACPP=DIR (a llama.cpp build's bin folder, e.g. from
# ../shared/peers/build-llama.sh cuda /tmp/lcpp-cuda) adds llama-bench on
# the same files, alternated with glint's runs. MODELS=DIR keeps the models
# elsewhere; TYPES="Q4_0 F16" picks the weight types.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
out="$here/out"
models="${MODELS:-$here/models}"
types="${TYPES:-Q4_0 Q4_K_M Q8_0 F16}"
mkdir -p "$out" "$models"
gen="$here/generate"

# 1. An OpenCL loader: glint opens libOpenCL.so.1 at run time.
if ! ldconfig -p 2>/dev/null | grep -q 'libOpenCL\.so\.1 '; then
	for f in /usr/local/cuda/targets/*/lib/libOpenCL.so.1 /usr/local/cuda/lib64/libOpenCL.so.1; do
		if [ -e "$f" ]; then
			export GLINT_OPENCL_LIB="$f"
			echo "== OpenCL loader: $f"
			break
		fi
	done
fi

# 2. The GPU's driver registered with the loader (an ICD folder here when
#    /etc/OpenCL/vendors lacks it).
eval "$("$gen" devices --register "$here/icd")"
"$gen" devices | tee "$out/devices.txt"
if ! grep -q '(GPU,' "$out/devices.txt"; then
	echo "no OpenCL GPU among the devices above: the figures below are not a GPU's" >&2
fi

# 3. The tests on every device (the layers tests need ../shared; they skip
#    without it).
echo "== OpenCL tests"
./opencl.test -test.timeout 30m 2>&1 | tail -n 20 | tee "$out/opencl-tests.txt" || true
(cd "$here" && ./layers.test -test.run 'OpenCL|LlamaCppGreedy' -test.timeout 30m 2>&1 | tail -n 20 | tee "$out/layers-tests.txt") || true

# 4. The models, deterministic (the files make bench writes, but for the
#    tokenizer: the prompts below are token ids).
for t in $types F16; do
	m="$models/1b-$t.gguf"
	[ -f "$m" ] && continue
	case $t in
	Q4_K_M) "$gen" quantize "$models/1b-F16.gguf" "$m.part" Q4_K_M ;;
	*) "$gen" synth --shape llama3.2-1b --type "$t" -o "$m.part" ;;
	esac
	mv "$m.part" "$m"
done

ids() { seq -s, 1 "$1"; }

# 5. Per type: decode after a 128-token prompt (profiled too), TTFT of 128
#    and 512 tokens, parity; llama-bench alternated where given.
for t in $types; do
	m="$models/1b-$t.gguf"
	for round in 1 2; do
		echo "== $t round $round: glint"
		"$gen" report -b opencl -m "$m" --prompt-ids "$(ids 128)" -n 64 --runs 3 --profile --out "$out/$t-pp128-r$round"
		"$gen" report -b opencl -m "$m" --prompt-ids "$(ids 512)" -n 4 --runs 3 --out "$out/$t-pp512-r$round"
		if [ -n "${LLAMACPP:-}" ]; then
			echo "== $t round $round: llama.cpp"
			"$LLAMACPP/llama-bench" -m "$m" -ngl 99 -p 128,512 -n 64 -r 3 | tee "$out/$t-llamacpp-r$round.md"
		fi
	done
	"$gen" parity -m "$m" --prompt-ids "$(ids 16)" -n 16 --backends cpu,opencl 2>&1 | tail -n 5 | tee "$out/$t-parity.txt"
done
echo "== done: $out (report.json per run: tbt, ttft, launches_per_token, device_bytes_per_token)"
