# glint — see README.md. Every target works on a fresh Debian machine once
# .ci/run (or `make deps`) has installed the OpenCL packages.
GO      ?= go
BIN     := bin
CACHE   := .cache
SHARED  ?= ../shared
DEMO    := $(CACHE)/demo-small-Q8_0.gguf

# make bench: weight types (in order), tokens per run, timed runs, backends.
BENCH_TYPES    ?= Q4_0 Q8_0 Q4_K_M Q6_K F16
BENCH_N        ?= 16
BENCH_RUNS     ?= 3
BENCH_BACKENDS ?= cpu,opencl
BENCH_THREADS  ?= 0
BENCH_PROMPT   ?= Once upon a time
BENCH_VOCAB    := $(SHARED)/models/llama.cpp-vocab/ggml-vocab-llama3-bpe.gguf
# ... and ARCH:SHAPE:TYPE beyond Llama: one Qwen-shaped and one Gemma-shaped file.
BENCH_ARCHS    ?= qwen2:qwen2.5-0.5b:Q4_0 gemma3:gemma3-270m:Q4_0

# make bench-vs-llamacpp: the llama.cpp peer's bin folder, weight types, rounds,
# threads, extra llama-bench arguments (--poll 0 on a busy machine).
GLINT_LLAMACPP ?= .peer/llama.cpp-cpu/build/bin
VS_TYPES       ?= Q4_0 Q8_0 F16 Q4_K_M
VS_ROUNDS      ?= 3
VS_THREADS     ?= 2
VS_LLAMA_ARGS  ?=

# make bench-serve: generate serve against llama-server (scripts/bench-serve.sh):
# rounds, --parallel values, tokens per request, context, clients.
SERVE_ROUNDS   ?= 1
SERVE_PARALLEL ?= 1 4 8
SERVE_N        ?= 32
SERVE_CTX      ?= 2048
SERVE_CLIENTS  ?= 8

.PHONY: all build test lint demo bench bench-vs-llamacpp bench-serve bench-gpu onnxruntime deps fuzz soak clean

all: build

build:
	$(GO) build -o $(BIN)/generate ./cmd/generate

lint:
	$(GO) vet ./...
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The test command of the README: vet, gofmt, then every test with the race
# detector (OpenCL tests run on PoCL; shared-data tests read $(SHARED)).
test: lint
	$(GO) test -race -timeout 45m ./...

# The main job with nothing to download: a synthetic model (random weights, so
# its tokens are noise: shown as ids) generated on the CPU and, where there is
# an OpenCL device, on it, with a step-by-step parity check of the two. Where
# the staged models are present (../shared), a real one tells a story too.
demo: build
	@mkdir -p $(CACHE)
	@test -f $(DEMO) || $(BIN)/generate synth --shape small --type Q8_0 --seed 7 --std 0.2 -o $(DEMO)
	@echo "== demo: synthetic random-weight model $(DEMO) (nothing downloaded); greedy ids"
	$(BIN)/generate -m $(DEMO) -b cpu --temp 0 -n 16 -p "Once upon a time" --output ids
	@if $(BIN)/generate devices >/dev/null 2>&1; then \
		$(BIN)/generate -m $(DEMO) -b opencl --temp 0 -n 16 -p "Once upon a time" --output ids && \
		$(BIN)/generate parity -m $(DEMO) -p "Once upon a time" -n 8 --backends cpu,opencl; \
	else echo "(no OpenCL device: skipped -b opencl; install pocl-opencl-icd or a GPU driver)"; fi
	@if [ -f $(SHARED)/models/stories260K/stories260K.gguf ]; then \
		echo "== stories260K (trained, from $(SHARED)/models)"; \
		$(BIN)/generate -m $(SHARED)/models/stories260K/stories260K.gguf -b opencl --temp 0 -n 64 -p "Once upon a time" 2>/dev/null || \
		$(BIN)/generate -m $(SHARED)/models/stories260K/stories260K.gguf -b cpu --temp 0 -n 64 -p "Once upon a time" 2>/dev/null; echo; \
	fi

# Latency report of the Llama-3.2-1B-shaped synthetic model on cpu and opencl,
# one weight type at a time (Q4_0 first), then of the BENCH_ARCHS models
# (Qwen 2.5 0.5B- and Gemma 3 270M-shaped): markdown table on stdout,
# out/bench-TYPE/report.json and report.svg. The models are written once into
# $(CACHE) (with the Llama 3 tokenizer when the shared vocab is there). A
# backend that fails is a row in its table; the target fails at the end.
bench: build
	@mkdir -p $(CACHE)
	@status=0; for t in $(BENCH_TYPES); do \
		m=$(CACHE)/bench-llama3.2-1b-$$t.gguf; \
		if [ ! -f $$m ]; then \
			vocab=""; if [ -f $(BENCH_VOCAB) ]; then vocab="--vocab $(BENCH_VOCAB)"; fi; \
			$(BIN)/generate synth --shape llama3.2-1b --type $$t $$vocab -o $$m.part && mv $$m.part $$m || exit 1; \
		fi; \
		echo "== bench: $$m: $(BENCH_BACKENDS), $(BENCH_N) tokens × $(BENCH_RUNS) runs"; \
		$(BIN)/generate report -b $(BENCH_BACKENDS) -m $$m -p "$(BENCH_PROMPT)" -n $(BENCH_N) \
			--runs $(BENCH_RUNS) -t $(BENCH_THREADS) --out out/bench-$$t || status=1; \
	done; \
	for spec in $(BENCH_ARCHS); do \
		a=$${spec%%:*}; rest=$${spec#*:}; shape=$${rest%%:*}; t=$${rest#*:}; \
		m=$(CACHE)/bench-$$shape-$$t.gguf; \
		if [ ! -f $$m ]; then \
			$(BIN)/generate synth --arch $$a --shape $$shape --type $$t -o $$m.part && mv $$m.part $$m || exit 1; \
		fi; \
		echo "== bench: $$m: $(BENCH_BACKENDS), $(BENCH_N) tokens × $(BENCH_RUNS) runs"; \
		$(BIN)/generate report -b $(BENCH_BACKENDS) -m $$m -p "$(BENCH_PROMPT)" -n $(BENCH_N) \
			--runs $(BENCH_RUNS) -t $(BENCH_THREADS) --out out/bench-$$shape-$$t || status=1; \
	done; exit $$status

# glint's CPU backend against llama.cpp's llama-bench on the same 1B-shaped
# files, alternated round by round: a markdown table of medians and ratios
# (scripts/bench-vs-llamacpp.sh). The peer is built separately.
bench-vs-llamacpp:
	@if [ ! -x "$(GLINT_LLAMACPP)/llama-bench" ]; then \
		echo "no llama.cpp peer in $(GLINT_LLAMACPP); build it (about 3 minutes) with"; \
		echo "  $(SHARED)/peers/build-llama.sh cpu .peer/llama.cpp-cpu"; \
		echo "or point GLINT_LLAMACPP at a built peer's bin folder"; exit 1; \
	fi
	bash scripts/bench-vs-llamacpp.sh -p "$(GLINT_LLAMACPP)" -r $(VS_ROUNDS) -t $(VS_THREADS) -x "$(VS_LLAMA_ARGS)" $(VS_TYPES)

# Aggregate generated tokens/s of 8 concurrent clients against generate serve
# and llama-server with the same --parallel, -c and threads, alternated
# (scripts/bench-serve.sh; a markdown table). The peer is built separately.
bench-serve:
	@if [ ! -x "$(GLINT_LLAMACPP)/llama-server" ]; then \
		echo "no llama-server in $(GLINT_LLAMACPP); build the peer (about 3 minutes) with"; \
		echo "  $(SHARED)/peers/build-llama.sh cpu .peer/llama.cpp-cpu"; \
		echo "or point GLINT_LLAMACPP at a built peer's bin folder"; exit 1; \
	fi
	bash scripts/bench-serve.sh -p "$(GLINT_LLAMACPP)" -r $(SERVE_ROUNDS) -t $(VS_THREADS) -n $(SERVE_N) \
		-c $(SERVE_CTX) -k $(SERVE_CLIENTS) -P "$(SERVE_PARALLEL)" -x "$(VS_LLAMA_ARGS)"

# A bounded soak of generate serve (cmd/generate/soak_test.go): bin/generate
# on llama3-tiny, --parallel 4, 200 greedy requests from 16 clients (a
# quarter cut mid-stream) beside 20 stalled bodies and 4 8-MB /tokenize
# bodies; every whole reply must equal its solo text, nothing may be left
# running, and SIGTERM must end it with status 0. Prints peak RSS and counts.
soak: build
	GLINT_SOAK=1 GLINT_SOAK_BIN=$(abspath $(BIN)/generate) GLINT_SHARED=$(abspath $(SHARED)) \
		$(GO) test ./cmd/generate -run '^TestSoak$$' -count=1 -v -timeout 15m

# What a GPU machine without Go needs, in dist/ (git-ignored; about 35 MB,
# stripped): the generate binary, the OpenCL and layers test binaries, the
# Llama 3 vocabulary and the llama.cpp peer's sources (from $(SHARED)), and
# bench-gpu.sh, which registers the GPU's OpenCL driver, makes the synth
# models there and runs the tests, parity and the timings (see the script).
BENCH_GPU_LDFLAGS := -ldflags='-s -w' -trimpath
bench-gpu:
	@mkdir -p dist
	$(GO) build $(BENCH_GPU_LDFLAGS) -o dist/generate ./cmd/generate
	$(GO) test -c $(BENCH_GPU_LDFLAGS) -o dist/opencl.test ./backend/opencl
	$(GO) test -c $(BENCH_GPU_LDFLAGS) -o dist/layers.test ./layers
	install -m 0755 scripts/bench-gpu.sh dist/
	@if [ -f $(BENCH_VOCAB) ]; then install -m 0644 $(BENCH_VOCAB) dist/; fi
	@if [ -f $(SHARED)/peers/build-llama.sh ]; then mkdir -p dist/peers && install -m 0644 $(SHARED)/peers/build-llama.sh $(SHARED)/peers/llama.cpp-*.tar.xz $(SHARED)/peers/refgen-greedy.cpp dist/peers/; fi
	@du -sh dist | sed 's/\t/ in /'
	@echo "on a lent GPU machine (device tool): run with carry [\"dist\"]: bash dist/bench-gpu.sh --quick --batch"
	@echo "elsewhere: copy dist/ over and run bash dist/bench-gpu.sh --quick"

# ONNX Runtime's shared library into third_party/onnxruntime (git-ignored).
onnxruntime:
	bash scripts/onnxruntime.sh

deps:
	bash .ci/deps.sh

fuzz:
	$(GO) test ./model/gguf -run '^$$' -fuzz FuzzParse -fuzztime 5m -parallel 1
	$(GO) test ./model/load -run '^$$' -fuzz FuzzConfigFromGGUF -fuzztime 5m -parallel 1
	$(GO) test ./model/safetensors -run '^$$' -fuzz FuzzParse -fuzztime 5m -parallel 1
	$(GO) test ./tokenizer -run '^$$' -fuzz FuzzEncode -fuzztime 5m -parallel 1
	$(GO) test ./tokenizer -run '^$$' -fuzz FuzzFromHF -fuzztime 5m -parallel 1
	$(GO) test ./dtype -run '^$$' -fuzz FuzzDequantizeBlocks -fuzztime 5m -parallel 1
	$(GO) test ./dtype -run '^$$' -fuzz FuzzQuantizeRow -fuzztime 5m -parallel 1
	$(GO) test ./dtype -run '^$$' -fuzz FuzzQuantizeCacheRow -fuzztime 5m -parallel 1
	$(GO) test ./chattemplate -run '^$$' -fuzz FuzzParseJSON -fuzztime 5m -parallel 1
	$(GO) test ./grammar -run '^$$' -fuzz FuzzParse -fuzztime 5m -parallel 1
	$(GO) test ./grammar -run '^$$' -fuzz FuzzSchema -fuzztime 5m -parallel 1
	$(GO) test ./chattemplate -run '^$$' -fuzz FuzzRender -fuzztime 5m -parallel 1
	$(GO) test ./serve -run '^$$' -fuzz FuzzRequest -fuzztime 5m -parallel 1

clean:
	rm -rf $(BIN) dist
