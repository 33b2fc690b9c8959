// Package glint is the library entry point: Open loads a model (Llama, Qwen,
// Gemma, Phi-3 or GPT-2; a GGUF file or Hugging Face directory) on a named
// backend — or an ONNX export on ONNX Runtime — with its tokenizer and an
// engine.Engine that runs sessions over it.
//
//	m, err := glint.Open("model.gguf", glint.Options{Backend: "opencl"})
//	ids := m.Tokenizer.Encode("Once upon a time", true)
//	tm, err := engine.Generate(ctx, m.Engine, ids, engine.Options{MaxTokens: 20})
package glint

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/glint-llm/glint/backend"
	"github.com/glint-llm/glint/backend/cpu"
	"github.com/glint-llm/glint/backend/opencl"
	"github.com/glint-llm/glint/dtype"
	"github.com/glint-llm/glint/engine"
	"github.com/glint-llm/glint/kvcache"
	"github.com/glint-llm/glint/layers"
	"github.com/glint-llm/glint/model"
	"github.com/glint-llm/glint/model/load"
	"github.com/glint-llm/glint/numerics"
	"github.com/glint-llm/glint/onnx"
	"github.com/glint-llm/glint/tokenizer"
)

// Backends are the names Open accepts.
var Backends = []string{"cpu", "opencl", "onnx"}

// Options say where and how a model runs.
type Options struct {
	Backend string // cpu (default), opencl or onnx
	Threads int    // CPU threads (0: all cores)
	Device  string // OpenCL device: index or name substring ("": first GPU, else first device)
	// Tune builds and launches the OpenCL kernels otherwise than suits the
	// device, for benchmarks (opencl.Options.Tune: portable, gpu, gemm=64 …);
	// every tuning gives the same results.
	Tune string
	// Numerics chooses the CPU kernel level and the llama.cpp build whose
	// arithmetic both backends reproduce (zero: the host's best level and
	// native build; the command line fills it from GLINT_CPU_SIMD and
	// GLINT_GGML_FLAVOR, numerics.FromEnv).
	Numerics numerics.Options
	// Context is the number of KV-cache cells, llama.cpp's -c: rounded up to a
	// multiple of 32 as llama.cpp pads it, of 256 with flash attention (0 or
	// more than trained: the model's trained context). Sequences share them
	// (KVLayout).
	Context int
	// Seqs is the number of sequences (sessions) the KV cache holds at once
	// (llama.cpp's --parallel; 0: 1).
	Seqs int
	// StepTokens is the most tokens one engine step feeds the model
	// (llama.cpp's n_batch; 0: engine.StepTokens).
	StepTokens int
	// KVLayout is "unified" (the default: every sequence in one buffer,
	// each may use every cell, a shared prefix is stored once) or
	// "per-stream" (each sequence its own Context/Seqs cells).
	KVLayout string
	OrtLib   string // libonnxruntime path ("": $ONNXRUNTIME_LIB, then third_party/onnxruntime)
	// CacheTypeK and CacheTypeV are the KV-cache types by llama.cpp's names
	// (kvcache.TypeNames): "f16" (the default, as in llama.cpp), "f32",
	// "bf16", or a block type ("q8_0", "q4_0", …), which needs flash
	// attention.
	CacheTypeK, CacheTypeV string
	// FlashAttn is llama.cpp's -fa: "on", "off" or "auto" (the default: on
	// exactly when a cache type is neither f32 nor f16; kvcache.Flash).
	FlashAttn string
	// Progress, when set, is told the weight bytes loaded so far.
	Progress func(done, total int64)
	// Wrap, when set, is applied to the glint backend right after it is made
	// and before the weights load onto it (backend.Profiled, for reports);
	// Model.Backend is what it returns. Unused for onnx.
	Wrap func(backend.Backend) backend.Backend
	// Spec configures speculative decoding (Model.Speculation).
	Spec SpecOptions

	cacheK, cacheV dtype.Type // parsed CacheTypeK, CacheTypeV
}

// Model is a loaded model with its tokenizer. Its Engine (safe for
// concurrent use) opens sessions: m.NewSession, engine.Generate(ctx, m.Engine, …).
type Model struct {
	*engine.Engine
	// Tokenizer is nil when the file has none (use token ids).
	Tokenizer *tokenizer.Tokenizer
	// TokenizerErr says why Tokenizer is nil.
	TokenizerErr error
	// Backend is the glint backend the layers run on (nil for onnx).
	Backend backend.Backend
	Config  model.Config // zero for onnx
	// Quantized: some weights are block-quantised, so matmuls round their
	// activations to 8 bits (see dtype.ActivationType).
	Quantized bool
	// HalfWeights: some weights are F16 or BF16, so matmuls round their
	// activations to that type (as llama.cpp does).
	HalfWeights bool
	LoadTime    time.Duration
	// Pooling is the file's {arch}.pooling_type (PoolingUnspecified when
	// it has none): how its embeddings are pooled unless told otherwise.
	Pooling engine.Pooling
	// Device names the hardware (or ONNX Runtime) that runs the model.
	Device string
	// Info is one line: backend, device, file and shape.
	Info string
	// KVCacheBytes is the memory the KV cache takes (0 for onnx).
	KVCacheBytes int64
	// FlashAttn reports whether attention runs as flash attention.
	FlashAttn bool
	eos       []int32 // extra end-of-generation ids (ONNX configs)
	closers   []func() error

	// Draft is the draft model of speculative decoding (Options.Spec), nil
	// when there is none.
	Draft *Model
	spec  SpecOptions
}

// Close releases the model, its backend and the mapped file.
func (m *Model) Close() error {
	var first error
	for i := len(m.closers) - 1; i >= 0; i-- {
		if err := m.closers[i](); err != nil && first == nil {
			first = err
		}
	}
	m.closers = nil
	return first
}

// NewBackend makes the glint backend o.Backend names (cpu or opencl) with
// o.Threads, or o.Device and o.Tune, and o.Numerics.
func NewBackend(o Options) (backend.Backend, error) {
	switch o.Backend {
	case "", "cpu":
		b, err := cpu.NewWith(cpu.Options{Threads: o.Threads, Numerics: o.Numerics})
		if err != nil {
			return nil, err
		}
		return b, nil
	case "opencl":
		return opencl.New(opencl.Options{Device: o.Device, Tune: o.Tune, Numerics: o.Numerics})
	}
	return nil, fmt.Errorf("unknown backend %q (want cpu, opencl or onnx)", o.Backend)
}

// Open loads path on o.Backend.
func Open(path string, o Options) (*Model, error) {
	start := time.Now()
	m := &Model{Pooling: engine.PoolingUnspecified, spec: o.Spec}
	specKind, err := o.Spec.kind()
	if err != nil {
		return nil, err
	}
	if o.Backend == "onnx" {
		om, err := onnx.Open(path, onnx.Options{Lib: o.OrtLib, Threads: o.Threads})
		if err != nil {
			return nil, err
		}
		m.Engine = engine.New(om)
		m.Engine.SetStepTokens(o.StepTokens)
		m.closers = append(m.closers, m.Engine.Close)
		m.Tokenizer, m.TokenizerErr = tokenizer.FromHF(path)
		m.eos = om.Info().EOS
		m.Device = "ONNX Runtime " + om.Info().Runtime + " (CPU)"
		m.LoadTime = time.Since(start)
		m.Info = fmt.Sprintf("onnx: %s: vocab %d, ctx %d", filepath.Base(path), om.Vocab(), om.Context())
		return m, nil
	}

	f, err := load.Open(path)
	if err != nil {
		return nil, err
	}
	m.closers = append(m.closers, f.Close)
	if f.GGUF != nil {
		m.Tokenizer, m.TokenizerErr = tokenizer.FromGGUF(f.GGUF)
		for _, ti := range f.GGUF.Tensors {
			m.Quantized = m.Quantized || ti.Type.Quantized()
			m.HalfWeights = m.HalfWeights || ti.Type == dtype.F16 || ti.Type == dtype.BF16
		}
		if p, err := f.GGUF.Uint(f.Config.Arch + ".pooling_type"); err == nil && p <= uint64(engine.PoolingRank) {
			m.Pooling = engine.Pooling(p)
		}
	} else {
		m.Tokenizer, m.TokenizerErr = tokenizer.FromHF(f.Dir)
	}
	if m.TokenizerErr != nil {
		m.Tokenizer = nil
	}
	b, err := NewBackend(o)
	if err != nil {
		m.Close()
		return nil, err
	}
	if o.Wrap != nil {
		b = o.Wrap(b)
	}
	m.Backend = b
	m.Device = b.Device()
	m.closers = append(m.closers, b.Close)
	kt, err := kvcache.ParseType(o.CacheTypeK)
	if err == nil {
		var vt dtype.Type
		if vt, err = kvcache.ParseType(o.CacheTypeV); err == nil {
			o.cacheK, o.cacheV = kt, vt
		}
	}
	var flash bool
	if err == nil {
		flash, err = kvcache.Flash(o.FlashAttn, o.cacheK, o.cacheV)
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	layout, ok := kvcache.Layouts[o.KVLayout]
	if o.KVLayout == "" {
		layout, ok = kvcache.Unified, true
	}
	if !ok {
		m.Close()
		return nil, fmt.Errorf("KV layout %q: want unified or per-stream", o.KVLayout)
	}
	ctx := ContextSize(o.Context, f.Config.Context, flash)
	var avail int64
	if o.Backend == "" || o.Backend == "cpu" {
		avail = availableMemory()
	}
	// A verification reads the logits of every token it feeds.
	outputs := 0
	if specKind != "" {
		outputs = max(o.Seqs, 8, o.Spec.draftMax()+1)
	}
	lm, err := layers.Load(b, f.Config, f.Source, layers.Options{Context: ctx, Progress: o.Progress, CacheK: o.cacheK, CacheV: o.cacheV,
		Flash: flash, MaxCacheBytes: avail, Seqs: o.Seqs, Layout: layout, MaxOutputs: outputs})
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.Engine = engine.New(lm)
	m.Engine.SetStepTokens(o.StepTokens)
	m.closers = append(m.closers, m.Engine.Close)
	m.Config = lm.Config()
	m.KVCacheBytes, m.FlashAttn = lm.Cache().Bytes(), flash
	m.LoadTime = time.Since(start)
	c := m.Config
	seqs := ""
	if n := lm.Seqs(); n > 1 {
		seqs = fmt.Sprintf(" (%d sequences, %v)", n, layout)
	}
	fa := "off"
	if flash {
		fa = "on"
	}
	m.Info = fmt.Sprintf("%s (%s): %s: %s, %d layers, embd %d, heads %d/%d, ff %d, vocab %d, ctx %d%s, kv cache %s/%s %.1f MiB, flash attention %s",
		b.Name(), b.Device(), filepath.Base(path), c.Arch, c.NLayer, c.NEmbd, c.NHead, c.NHeadKV, c.NFF, c.Vocab, ctx, seqs,
		kvcache.TypeName(o.cacheK), kvcache.TypeName(o.cacheV), float64(m.KVCacheBytes)/(1<<20), fa)
	if specKind == "draft" {
		d, err := openDraft(m, o)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.Draft = d
		m.closers = append(m.closers, d.Close)
		m.Info += "; draft: " + d.Info
	}
	return m, nil
}

// IsEOG reports whether id ends a generation: the tokenizer's end-of-text
// and end-of-turn tokens, and an ONNX model's configured eos ids.
func (m *Model) IsEOG(id int32) bool {
	if m.Tokenizer != nil && m.Tokenizer.IsEOG(id) {
		return true
	}
	return slices.Contains(m.eos, id)
}

// ContextSize is the number of KV cells a -c of c gives a model trained on
// trained positions: c rounded up as llama.cpp pads n_ctx (its
// llama_kv_cache_get_padding: to a multiple of 256 with flash attention,
// else of 32), and at most trained (0 or more than trained: trained). The
// padding moves a context shift where llama.cpp's moves.
func ContextSize(c, trained int, flash bool) int {
	if c <= 0 || c > trained {
		return trained
	}
	pad := 32
	if flash {
		pad = 256
	}
	return min((c+pad-1)/pad*pad, trained)
}
